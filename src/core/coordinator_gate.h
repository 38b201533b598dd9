// CycleGate: who may run the coordinator's next cycle — the coordinator thread,
// or a user thread waiting for a handle (Note [The waiter runs the cycle]).
//
// The gate's mutex guards every piece of the coordinator's cycle state (tensor
// queue drain, negotiator, executor, pending table); whoever holds it may run a
// cycle. help() is called by HandleState::wait from any user thread; the rest by
// the coordinator. The gate outlives the coordinator (handles share it): once
// detach() has run, help() returns at once.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>

#include "core/handle.h"

namespace kolo::core {

class Coordinator;

class CycleGate : public CycleHelper {
 public:
  explicit CycleGate(Coordinator* coordinator) : coordinator_(coordinator) {}

  // Runs cycles on the calling thread while the handle is not done, the
  // coordinator is not in a cycle, and there is news (kHelpIdle without news
  // ends it); then leaves the rest to the coordinator thread.
  void help(const HandleState& handle, Clock::time_point deadline) override;

  std::mutex& mu() { return mu_; }
  // Coordinator: true while a user thread is helping; the coordinator then
  // stays out of the way (wait_no_helpers) instead of competing for the core.
  bool helping() const { return helpers_.load(std::memory_order_acquire) > 0; }
  // Coordinator, without mu(): returns when no thread helps, or after `timeout`.
  void wait_no_helpers(std::chrono::microseconds timeout);
  // Coordinator, with mu() held, when it stops: no cycle runs outside it from now.
  void detach() { coordinator_ = nullptr; }

 private:
  std::mutex mu_;
  Coordinator* coordinator_;  // guarded by mu_; null once detached
  std::atomic<int> helpers_{0};
  std::mutex idle_mu_;
  std::condition_variable idle_cv_;
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

}  // namespace kolo::core
