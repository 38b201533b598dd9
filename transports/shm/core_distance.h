// Whether local ranks 0 and 1 of a node run on cores far apart: the shm engines
// stream their slots to memory when they do (Note [Streaming stores across
// distant cores] in allreduce.cc says why and what was measured).
//
// Contract of cores_far_apart(): collective over the node's ranks, at the same
// calls on every rank. Local rank 0 and local rank 1 pass one counter in the
// node's segment (node.h, Layout) back and forth, kPingPongs times; rank 0
// publishes, through another, whether the round trip (the median of batches'
// means: Note [Timing round trips in batches]) exceeded kFarRoundTripNs, and
// every rank returns that verdict. Counter values only grow: `round` is the node's
// calibration number, from 1. CoreDistance (below) is the node's one verdict,
// which both engines consult.
#pragma once

#include <cstdint>
#include <functional>

#include "common/status.h"

namespace kolo::shm {

// The two counters, in local rank 0's block: ping (passed between ranks 0 and
// 1) and decision.
struct CoreProbe {
  uint64_t* ping;
  uint64_t* decision;
};

// Waits until `counter` (local rank `who`'s) reaches `target`; fails if that rank died.
using CounterWait = std::function<Status(const uint64_t* counter, uint64_t target, int who)>;

// When the node measures again (the VM moves between placements while a job
// runs): at the first call that could stream, then once kRecalibrateEvery such
// calls or kRecalibrateBytes of them have passed, whichever comes first (Note
// [Measuring again by bytes]), counting the calls of both engines. Every rank of
// the node feeds it the same calls and sizes, so every rank measures at the
// same calls.
constexpr uint64_t kRecalibrateEvery = 64;
constexpr uint64_t kRecalibrateBytes = uint64_t{256} << 20;

class RecalibrationClock {
 public:
  // Whether the call about to run, of `bytes` (the same on every rank), measures.
  bool due(uint64_t bytes) {
    const bool now = calls_ == 0 || calls_ >= kRecalibrateEvery || bytes_ >= kRecalibrateBytes;
    if (now) calls_ = bytes_ = 0;
    ++calls_;
    bytes_ += bytes;
    return now;
  }

 private:
  uint64_t calls_ = 0;  // since the last measurement, that one included
  uint64_t bytes_ = 0;
};

Status cores_far_apart(const CoreProbe& probe, uint64_t round, int local_rank,
                       const CounterWait& wait, bool* far);

// CoreDistance: the node's one verdict (Note [One calibration for the node]).
// Owned by the Node; called by the coordinator thread through the shm engines,
// for every call that could stream, in the same order on every local rank.
class CoreDistance {
 public:
  // Before the first call: the counters (in the segment) and where this rank is.
  void init(const CoreProbe& probe, int local_rank, int local_size) {
    probe_ = probe;
    local_rank_ = local_rank;
    local_size_ = local_size;
  }
  // For a call of `bytes` (the same on every rank) that could stream: measures
  // first when the clock says so, then answers the verdict in *far. `wait`
  // waits for a peer's counter (and names the engine in its error). A failure
  // leaves the verdict as it was; the caller's engine is then broken.
  Status far(uint64_t bytes, const CounterWait& wait, bool* far);
  // The last verdict (false before the first measurement).
  bool last() const { return far_; }
  // Measurements so far, the same on every local rank (tests).
  uint64_t measurements() const { return rounds_; }

 private:
  CoreProbe probe_{};
  int local_rank_ = 0;
  int local_size_ = 1;
  RecalibrationClock clock_;
  uint64_t rounds_ = 0;
  bool far_ = false;
};

// Note [One calibration for the node]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Where the cores are is a property of the node, not of an engine: both shm
// engines (allreduce, collectives) consult one CoreDistance, fed every call of
// either that could stream, so a job that mixes allreduces and allgathers
// measures once per 64 calls of both, not once per 64 of each, and neither
// engine runs on a verdict older than the other's. Every local rank makes the
// same calls to both engines in the same order (the coordinator's sequence), so
// every rank measures at the same calls.

}  // namespace kolo::shm
