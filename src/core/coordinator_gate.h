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
#include <functional>
#include <mutex>

#include "common/wait_policy.h"
#include "core/handle.h"
#include "core/tensor_queue.h"

namespace kolo::core {

class Coordinator;

// Gives an entry its handle (TensorEntry::handle) when the call needs one.
using HandleMaker = std::function<void(TensorEntry&)>;

class CycleGate : public CycleHelper {
 public:
  // `policy`: how a helper looks for news (WaitFor::kHelperNews, and Note
  // [Crowded nodes wait in the kernel] in common/wait_policy.h).
  explicit CycleGate(Coordinator* coordinator, WaitPolicy policy = WaitPolicy())
      : coordinator_(coordinator), policy_(policy) {}

  // Runs cycles on the calling thread while the handle is not done, the
  // coordinator is not in a cycle, and there is news (kHelperNews's yield phase
  // without news ends it); then leaves the rest to the coordinator thread.
  void help(const HandleState& handle, Clock::time_point deadline) override;

  // Note [A blocking call enters the cycle]: if no other thread holds the gate,
  // runs `entry` alone where it can (Note [A call alone] in coordinator.h), and
  // otherwise gives it its handle through `make_handle`, hands it to the
  // coordinator's cycle state directly and runs cycles for it as help() does.
  // Returns false (the entry untouched, no handle made) when the gate is taken
  // or the coordinator has stopped, and true otherwise, with *refused holding
  // why the entry was refused (TensorQueue::push's reasons) or OK, and *alone
  // whether it completed alone (then done: with a handle only if it made one
  // through `make_handle`). Otherwise the caller waits for the entry's handle as
  // usual.
  bool run_here(TensorEntry& entry, Clock::time_point deadline, const HandleMaker& make_handle,
                Status* refused, bool* alone);

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
  // Runs cycles until the handle is done or there is no news, then leaves
  // (handing back if not done). `tried`: the caller has just had its turn at the
  // gate (run_here), `ran`: and ran a cycle.
  void keep_helping(const HandleState& handle, Clock::time_point deadline, bool tried, bool ran);
  // Leaves the helpers: undone, the coordinator takes over at once.
  void leave(const HandleState& handle);

  std::mutex mu_;
  Coordinator* coordinator_;  // guarded by mu_; null once detached
  const WaitPolicy policy_;
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
// MPI calls of a cycle still come from one thread at a time; whether a waiter
// helps is decided in one place, WaitPolicy::waiter_runs_cycle()
// (common/wait_policy.h). A helper gives up after WaitFor::kHelperNews's yield
// phase without news (the peer is late): the coordinator takes over, so
// progress never depends on a user thread waiting.

// Note [A blocking call enters the cycle]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A blocking call (kolo_allreduce and the other collectives' blocking forms,
// kolo_barrier) knows when it submits that its
// thread will wait, so where a waiter may run the cycle (Note [The waiter runs
// the cycle]) it need not go through the queue at all: it takes the gate at
// once, puts its entry straight into the cycle's state (the negotiator, the
// flight recorder, the pending table; the queue only notes the name as in
// flight, for its duplicate check) and runs the cycle. That skips the queue's
// lock twice, the doorbell's wake-up of the coordinator, the drain and the
// help loop's look for news: at 2 ranks MPI's time over kolo's went from 0.95
// to 1.03 at 2 KiB and from 0.48 to 0.50 at 8 B (medians), and at 4 ranks on 2
// cores an 8-byte allreduce from 21.6-36.2 to 13.6-14.7 us
// (docs/perf/small-ops.md, "A blocking call enters the cycle"). The path
// of the tensor is otherwise the same: the same negotiation, execution and
// completion, so the same results and errors. When another thread holds the
// gate (the coordinator in a cycle, or another caller), the call submits
// through the queue and waits, as an asynchronous one does.

// Note [The coordinator dozes while waiters run cycles]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// While user threads run the cycles, every submit (the queue's doorbell) and
// every peer's ring would wake a coordinator asleep on the doorbell: a futex
// wake-up, and on a rank bound to one core a context switch away from the very
// thread that runs the cycle, twice per operation. So while a thread helps, and
// for WaitPolicy::doze_window() after the last one left with its handle done,
// the coordinator dozes instead (WaitFor::kDoze): it sleeps without announcing
// itself on the doorbell (rings and submits then make no system call), and
// between dozes looks for news as usual, so whatever nobody waits for still
// starts within one doze. A helper that leaves with its handle not done ends the
// doze at once.
// A doze that ends while a thread still helps starts the next one without
// taking the gate's mutex: the helper holds it for its whole cycle, and a
// coordinator blocked on it, woken by the helper's unlock right after the handle
// completed, takes the core from the waiter before kolo_wait returns (12-15 us
// against under 1 us). Each such doze is twice as long as the last, up to the
// profile's longest (800 us): a doze's end is a timer wake-up that takes the
// helper's core, every 100 us of a 20 ms allreduce otherwise.
// Dozes that begin while no thread helps lengthen the same way, counting from
// the first (100 us) after one that began while a thread helped: at 100 us
// each, operations a few hundred microseconds apart had the coordinator wake
// inside the caller's time between them, on the same core. Work nobody waits
// for, submitted just after the helpers left, so starts within 800 us.
// docs/perf/waiting.md has the runs. Past the window the coordinator sleeps on
// the doorbell again, and a submit wakes it at once (Note [Waking up]).

}  // namespace kolo::core
