// NodeDoorbell: the doorbell between coordinators on one node, as futexes in the
// node's shared segment (node.h) — so an idle coordinator sleeps in the kernel
// and wakes within microseconds of a peer's ring or a local enqueue, without
// polling. Any world's control plane rings its node peers through it.
//
// Layout: one cache line per local rank r, in r's part of the segment
// (Layout::kDoorbell): the highest cycle another rank has rung to r, plus one
// (u64; 0: none), r's wake word (u32, a futex), its "sleeping" flag and its
// "woken" flag (Note [A wake bumps the word only for a sleeper]). ring(c)
// raises every peer's cycle word and wakes the sleeping ones; wake() bumps the
// own word. A rank never hears its own ring. A sleeper reads its word,
// re-checks its conditions, then waits on the word's value, so no wake between
// the check and the sleep is lost. The lines start zeroed (Node::create).
// ring/rung/wait: coordinator thread only; wake(): any thread. Not copyable.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>

#include "common/status.h"
#include "transports/shm/node.h"

namespace kolo::shm {

class NodeDoorbell {
 public:
  // Over `node`'s doorbell lines (local: no collective); an error if another
  // doorbell uses them.
  static Status create(std::shared_ptr<Node> node, std::unique_ptr<NodeDoorbell>* out);

  void ring(uint64_t cycle);
  bool rung(uint64_t cycle) const;
  // Sleeps until rung(cycle), wake(), or the timeout (may return early).
  // `also_ready` is re-checked after the sleeper has announced itself (e.g. the
  // MPI doorbell for ranks on other nodes); a true answer skips the sleep.
  template <typename Ready>
  void wait(uint64_t cycle, std::chrono::microseconds timeout, Ready also_ready);
  void wake();

 private:
  struct alignas(64) Line {
    std::atomic<uint64_t> rung;    // highest cycle rung to this rank, plus one
    std::atomic<uint32_t> word;    // wake futex
    std::atomic<uint32_t> sleeping;
    std::atomic<uint32_t> woken;   // wake() since the last wait: sticky, so a wake
                                   // between the caller's checks and the sleep is kept
  };
  explicit NodeDoorbell(std::shared_ptr<Node> node) : node_(std::move(node)) {}
  Line& line(int local) const { return *reinterpret_cast<Line*>(node_->at(local, Layout::kDoorbell)); }
  void sleep_on(Line& mine, uint32_t seen, std::chrono::microseconds timeout);

  std::shared_ptr<Node> node_;
  int local_rank_ = 0;
  int local_size_ = 1;
};

template <typename Ready>
void NodeDoorbell::wait(uint64_t cycle, std::chrono::microseconds timeout, Ready also_ready) {
  Line& mine = line(local_rank_);
  const uint32_t seen = mine.word.load(std::memory_order_seq_cst);
  mine.sleeping.store(1, std::memory_order_seq_cst);
  if (mine.woken.exchange(0, std::memory_order_seq_cst) == 0 && !rung(cycle) && !also_ready())
    sleep_on(mine, seen, timeout);
  mine.sleeping.store(0, std::memory_order_relaxed);
}

}  // namespace kolo::shm
