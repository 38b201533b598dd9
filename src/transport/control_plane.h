// ControlPlane: the small-message seam that negotiation runs on (and, before the
// coordinator starts, kolo_init's exchange: core/init_agreement.h).
//
// Contract:
// - Called by one thread per rank: the thread in kolo_init until the coordinator
//   starts, the coordinator thread from then on; every collective call (allgather,
//   gather, broadcast, bitwise_and, barrier) happens in the same order on every
//   rank. Nothing here is thread-safe.
// - Blobs are small (requests and responses, kilobytes); buffers are owned by the
//   caller and only used for the duration of the call.
// - Waiting never spins without bound: an implementation polls briefly and then
//   yields or sleeps, so that more ranks than cores still make progress.
// - An error (a Status that is not OK) means the world is broken: the coordinator
//   fails every pending handle with it and stops.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "common/status.h"

namespace kolo::transport {

using Bytes = std::string;  // an opaque blob of bytes

// Where this rank sits. Ranks on one node are numbered local_rank 0..local_size-1;
// cross_rank/cross_size number the ranks with this rank's local_rank, one per
// node that has such a rank (they form a cross communicator); `node` numbers the
// nodes themselves, 0..nodes-1, the same on every rank of a node (the node
// layer, transports/shm, tells nodes apart by it).
struct Topology {
  int rank = 0;
  int size = 1;
  int local_rank = 0;
  int local_size = 1;
  int cross_rank = 0;
  int cross_size = 1;
  int node = 0;
};

class ControlPlane {
 public:
  virtual ~ControlPlane() = default;

  virtual const Topology& topology() const = 0;

  // Every rank contributes `mine`; on return `all` holds every rank's blob in rank
  // order, on every rank.
  virtual Status allgather(const Bytes& mine, std::vector<Bytes>* all) = 0;

  // Every rank contributes `mine`; on rank `root`, `all` receives every rank's blob
  // in rank order. Elsewhere `all` is left empty.
  virtual Status gather(const Bytes& mine, std::vector<Bytes>* all, int root) = 0;

  // `blob` on `root` is copied to every rank (replacing their `blob`).
  virtual Status broadcast(Bytes* blob, int root) = 0;

  // Elementwise bitwise AND of `bits` across ranks, in place. Every rank passes a
  // vector of the same length.
  virtual Status bitwise_and(std::vector<uint64_t>* bits) = 0;

  // Bytes that ride with the next bitwise_and() (Note [Data rides with the AND]
  // in core/negotiator.h); optional, and the default carries none.
  // carry_capacity(words, in_line) bytes may be written at carry_slot(words,
  // in_line) before the next bitwise_and() of `words` words; in_line asks for the
  // few bytes that share the vector's cache line where there is one (Note [The
  // carry shares the vector's line] in transports/shm/node_and.h; capacity 0
  // where there is none). After a bitwise_and(), unanimous() says whether every
  // rank passed a vector equal to this rank's, and only then (every rank having
  // asked for the same kind of slot: the caller makes the kind part of the
  // vector) is carried(r) what rank r wrote at its carry_slot() before that
  // call, readable until this rank's next bitwise_and(). Coordinator only, like
  // every call here.
  virtual size_t carry_capacity(size_t words, bool in_line = false) const { return 0; }
  virtual char* carry_slot(size_t words, bool in_line = false) { return nullptr; }
  virtual bool unanimous() const { return false; }
  virtual const char* carried(int rank) const { return nullptr; }

  virtual Status barrier() = 0;

  // The doorbell. Coordinators run negotiation cycles in lockstep (each cycle is a
  // collective), numbered 0, 1, 2, ... identically on every rank. A rank with
  // nothing new to say sleeps instead of running empty cycles; a rank that has
  // news rings the doorbell for the cycle it is about to run, and idle ranks join
  // it when they see the ring.
  //
  // ring(c): tell every other rank that cycle c is starting. Non-blocking.
  virtual Status ring(uint64_t cycle) = 0;
  // rung(c): has any other rank rung for cycle c or a later one? Non-blocking.
  virtual bool rung(uint64_t cycle) = 0;
  // Cycle c's ring and AND (bitwise_and) in one: a rank that has news rings
  // for it unless a peer has. A plane that sees its peers arrive at the AND may
  // ring only for peers that have not arrived when this rank has posted its
  // vector (Note [Ringing only the late] in transports/shm/node_and.h).
  virtual Status ring_and(uint64_t cycle, std::vector<uint64_t>* bits);

  // Sleeps until a peer rings for `cycle` or later, wake() is called, or `timeout`
  // passes; it may also return early. Where a ring can only be seen by polling,
  // polls at least every `poll` (KOLO_CYCLE_TIME_MS). The default polls rung() in
  // naps that grow from 10 us to `poll` (WaitFor::kRingPoll in
  // common/wait_policy.h); a transport with a blocking doorbell (a
  // futex in shared memory) overrides both this and wake(). Coordinator only.
  virtual void wait_for_ring(uint64_t cycle, std::chrono::microseconds timeout,
                             std::chrono::microseconds poll);

  // Ends a wait_for_ring in progress, or the next one, early. Any thread (the
  // tensor queue calls it on every enqueue).
  virtual void wake();

  // The liveness check (Note [Waits consult liveness] in transport/liveness.h): OK
  // while every peer runs, else KOLO_ERR_RANK_FAILED naming the ranks, for good.
  // Every wait inside the control plane and the transports already asks it; the
  // idle coordinator asks it after each wait_for_ring, whose sleeps an
  // implementation with a liveness check caps so that this happens often enough.
  // Coordinator only. The default (worlds without failures: loopback) is OK.
  virtual Status check_peers() { return Status::OK(); }

 private:
  std::mutex wake_mu_;
  std::condition_variable wake_cv_;
  bool woken_ = false;
};

}  // namespace kolo::transport
