// NodeDoorbell: the doorbell between coordinators on one node, as futexes in an
// MPI-3 shared-memory window — so an idle coordinator sleeps in the kernel and
// wakes within microseconds of a peer's ring or a local enqueue, without polling.
//
// Layout (one window on the node communicator, allocated by local rank 0), one
// cache line per local rank r: the highest cycle another rank has rung to r, plus
// one (u64; 0: none), r's wake word (u32, a futex), its "sleeping" flag and its
// "woken" flag (Note [A wake bumps the word only for a sleeper]).
// ring(c) raises every peer's cycle word and wakes the sleeping ones; wake() bumps
// the own word. A rank never hears its own ring. A sleeper reads its word, re-checks its conditions, then waits on the
// word's value, so no wake between the check and the sleep is lost.
// ring/rung/wait: coordinator thread only; wake(): any thread. Not copyable.
#pragma once

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>

#include "common/status.h"
#include "transports/mpi/mpi_wait.h"

namespace kolo::mpi {

class NodeDoorbell {
 public:
  // Collective over `local`. Allocates and zeroes the window once. Waits consult
  // `alive` (may be null), which outlives the doorbell and tells the destructor
  // whether freeing the window collectively is safe.
  static Status create(MPI_Comm local, Liveness* alive, std::unique_ptr<NodeDoorbell>* out);
  ~NodeDoorbell();

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
  NodeDoorbell() = default;
  void sleep_on(Line& mine, uint32_t seen, std::chrono::microseconds timeout);

  MPI_Win win_ = MPI_WIN_NULL;
  Liveness* alive_ = nullptr;
  Line* lines_ = nullptr;  // [r] = local rank r
  int local_rank_ = 0;
  int local_size_ = 1;
};

template <typename Ready>
void NodeDoorbell::wait(uint64_t cycle, std::chrono::microseconds timeout, Ready also_ready) {
  Line& mine = lines_[local_rank_];
  const uint32_t seen = mine.word.load(std::memory_order_seq_cst);
  mine.sleeping.store(1, std::memory_order_seq_cst);
  if (mine.woken.exchange(0, std::memory_order_seq_cst) == 0 && !rung(cycle) && !also_ready())
    sleep_on(mine, seen, timeout);
  mine.sleeping.store(0, std::memory_order_relaxed);
}

}  // namespace kolo::mpi
