// CycleGate: who may run the coordinator's next cycle — the coordinator thread,
// or a user thread waiting for a handle (Note [The waiter runs the cycle]).
//
// The gate's mutex guards every piece of the coordinator's cycle state (tensor
// queue drain, negotiator, executor, pending table); whoever holds it may run a
// cycle. help() is called by HandleState::wait from any user thread; the rest by
// the coordinator. The gate outlives the coordinator (handles share it): once
// detach() has run, help() returns at once.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>

#include "core/handle.h"

namespace kolo::core {

class Coordinator;

class CycleGate : public CycleHelper {
 public:
  // `crowded`: the node runs more ranks than it has CPUs (Note [Crowded nodes
  // wait in the kernel]).
  explicit CycleGate(Coordinator* coordinator, bool crowded = false)
      : coordinator_(coordinator), crowded_(crowded) {}
  bool crowded() const override { return crowded_; }

  // Runs cycles on the calling thread while the handle is not done, the
  // coordinator is not in a cycle, and there is news (kHelpIdle without news
  // ends it); then leaves the rest to the coordinator thread.
  void help(const HandleState& handle, Clock::time_point deadline) override;

  std::mutex& mu() { return mu_; }
  // Coordinator: true while a user thread is helping, or one finished helping
  // less than `window` ago; the coordinator then dozes instead of competing for
  // the core (Note [The coordinator dozes while waiters run cycles]).
  bool helping() const { return helpers_.load(std::memory_order_acquire) > 0; }
  bool helped_within(std::chrono::microseconds window) const;
  // Coordinator, without mu(): sleeps for `timeout`, or until a helper leaves
  // with its handle not done (the coordinator must take over at once: true).
  bool doze(std::chrono::microseconds timeout);
  // Whether a thread is inside doze() now (tests force their interleavings with it).
  bool dozing();
  // Coordinator, with mu() held, when it stops: no cycle runs outside it from now.
  void detach() { coordinator_ = nullptr; }

 private:
  std::mutex mu_;
  Coordinator* coordinator_;  // guarded by mu_; null once detached
  const bool crowded_;
  std::atomic<int> helpers_{0};
  std::atomic<int64_t> last_help_end_{0};  // steady-clock ns; 0: none, or handed back
  std::mutex idle_mu_;
  std::condition_variable idle_cv_;
  bool handed_back_ = false;  // guarded by idle_mu_: a helper left a handle undone
  int dozers_ = 0;            // guarded by idle_mu_
};

// Note [The waiter runs the cycle]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// With the coordinator as the only thread that runs cycles, a small allreduce
// hands the core over twice per rank (user -> coordinator -> user); with ranks
// bound to cores, both threads share one, and each hand-over costs a context
// switch plus the time the peer waits for it. A user thread that is about to
// wait has nothing better to do, so it runs the cycle itself: it takes the
// gate (never waiting for it), drains the queue, negotiates, executes and
// completes handles exactly as the coordinator does — the path of a tensor is
// the same, only the thread differs. Meanwhile the coordinator thread sleeps
// until the helper leaves. Helpers run only where the control plane's idle
// checks make no foreign calls (every rank on one node, host tensors), so the
// MPI calls of a cycle still come from one thread at a time. A helper gives up
// after kHelpIdle without news (the peer is late): the coordinator takes over,
// so progress never depends on a user thread waiting.

// Note [Crowded nodes wait in the kernel]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// With more ranks than CPUs on the node (4 ranks on 2 cores in CI) every thread
// that polls or yields takes the core from the one thread that must run next.
// There a helper that finds no news hands back at once instead of yielding for
// kHelpIdle, its user thread sleeps on the handle's condition variable at once,
// and the coordinator neither spins before sleeping on the doorbell nor dozes
// after the helpers left (a doze wakes every kDoze): each waiter sleeps in the
// kernel until the thread that has what it needs wakes it. The shared-memory
// engines' waits between ranks are the exception: they yield before they sleep
// (Note [Waiting for a counter in the kernel] has the measurements).

// Note [The coordinator dozes while waiters run cycles]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// While user threads run the cycles, every submit (the queue's doorbell) and
// every peer's ring would wake a coordinator asleep on the doorbell: a futex
// wake-up, and on a rank bound to one core a context switch away from the very
// thread that runs the cycle, twice per operation. So while a thread helps, and
// for kDozeWindow after the last one left with its handle done, the coordinator
// dozes instead: it sleeps kDoze at a time without announcing itself on the
// doorbell (rings and submits then make no system call), and between dozes
// looks for news as usual, so whatever nobody waits for still starts within
// kDoze. A helper that leaves with its handle not done ends the doze at once.
// A doze that ends while a thread still helps starts the next one without
// taking the gate's mutex: the helper holds it for its whole cycle, and a
// coordinator blocked on it is woken by the helper's unlock, right after the
// handle completed, and takes the core from the waiter before kolo_wait
// returns (the breakdown's "wake": 12-15 us where the cycle ran past a doze,
// e.g. a 1 MiB alltoall or a far 128 KiB allreduce, against 0.3-0.9 us).
// Each such doze is twice as long as the last, up to kLongestDoze (800 us): a
// doze's end is a timer wake-up that takes the helper's core, every 100 us of a
// 20 ms allreduce otherwise. Work nobody waits for, submitted just after the
// helpers left, then starts within kLongestDoze instead of kDoze.
// Dozes that begin while no thread helps lengthen too (DozeLength): each is
// twice the last such one, up to kLongestDoze, counting from kDoze after one
// that began while a thread helped. At kDoze each, operations a few hundred
// microseconds apart had the coordinator wake every 100 us inside the caller's
// time between them, on the same core. kolo-allreduce-perf -r mpi, 2 near
// ranks, libkolo before / after in one binary, 5 pairs (-b 32K -e 2M -f 4 -w
// 500 -n 100), median us of kolo and of the MPI_Allreduce beside it: 512 KiB
// 62.6 / 35.2 and 127 / 101, 2 MiB 237 / 195 and 498 / 415, 32 and 128 KiB
// within the noise; 8 B allreduce 2.36-2.42 / 2.37-2.43 us (4 pairs), 16 KiB
// allgather 3.64 / 3.62 (3). Work nobody waits for starts within kLongestDoze
// here too.
// Past the window the coordinator sleeps on the doorbell again, and a submit
// wakes it at once (Note [Waking up]).

// The length of the coordinator's next doze (Note [The coordinator dozes while
// waiters run cycles]): `first` when a thread helps as it begins, else twice
// the last one that began so, up to `longest`, counting from `first` after a
// doze that began while a thread helped.
class DozeLength {
 public:
  DozeLength(std::chrono::microseconds first, std::chrono::microseconds longest)
      : first_(first), longest_(longest), idle_(first / 2) {}
  std::chrono::microseconds next(bool helping) {
    idle_ = helping ? first_ : std::min(2 * idle_, longest_);
    return helping ? first_ : idle_;
  }

 private:
  std::chrono::microseconds first_, longest_, idle_;
};

}  // namespace kolo::core
