// Whether local ranks 0 and 1 of a node run on cores far apart: the shm engines
// stream their slots to memory when they do (Note [Streaming stores across
// distant cores] in shm_transport.cc says why and what was measured).
//
// Contract: collective over the node's ranks of one engine, at the same calls on
// every rank (each engine counts its calibrations alike, from its headers or
// buckets). Local rank 0 pings, local rank 1 answers, kPingPongs times through
// three counters in the engine's own control blocks; rank 0 publishes whether the
// median round trip exceeded kFarRoundTripNs, and every rank returns that verdict.
// Counter values only grow: `round` is this engine's calibration number, from 1.
#pragma once

#include <cstdint>
#include <functional>

#include "common/status.h"

namespace kolo::mpi {

// The three counters: ping and decision in local rank 0's block, pong in rank 1's.
struct CoreProbe {
  uint64_t* ping;
  uint64_t* pong;
  uint64_t* decision;
};

// Waits until `counter` (local rank `who`'s) reaches `target`; fails if that rank died.
using CounterWait = std::function<Status(const uint64_t* counter, uint64_t target, int who)>;

// When an engine measures again (the VM moves between placements while a job
// runs): at its first call that could stream, then once kRecalibrateEvery such
// calls or kRecalibrateBytes of them have passed, whichever comes first (Note
// [Measuring again by bytes]). Every rank of the node feeds it the same calls
// and sizes, so every rank measures at the same calls.
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

}  // namespace kolo::mpi
