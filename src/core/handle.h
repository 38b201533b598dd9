// HandleState: the completion of one submitted tensor, shared by the user's
// handle (kolo_handle_t) and the coordinator.
//
// The coordinator calls complete() exactly once; any thread may poll or wait.
// Waiting spins and yields briefly (a small allreduce completes within
// microseconds), then sleeps on a condition variable, as the handle's wait
// profile says (common/wait_policy.h), so a waiting user thread does not starve
// the coordinator or the peer rank on a machine with few cores.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <memory>
#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/wait_policy.h"
#include "core/output_pool.h"
#include "transport/device.h"

namespace kolo::core {

class HandleState;

// Lets a thread that waits for a handle run the coordinator's cycles itself
// (Note [The waiter runs the cycle] in coordinator_gate.h).
class CycleHelper {
 public:
  using Clock = std::chrono::steady_clock;
  virtual ~CycleHelper() = default;
  // Runs cycles for `handle` until it is done, `deadline` passes, or nothing is
  // left to do for now; returns at once when another thread runs the cycle.
  virtual void help(const HandleState& handle, Clock::time_point deadline) = 0;
};

class HandleState {
 public:
  bool done() const { return done_.load(std::memory_order_acquire); }

  // Publishes the outcome and wakes waiters. Must be called once. `at` is when
  // it completed (the kCompleted stamp): now, unless the caller has read the clock.
  void complete(Status status);
  void complete(Status status, std::chrono::steady_clock::time_point at);

  // kInProgress until done, then the outcome's code.
  Code code() const { return done() ? status_.code() : Code::kInProgress; }
  // The outcome's message; "" until done.
  const std::string& message() const;

  // Blocks until done or until timeout_seconds pass (negative: forever).
  // Returns done().
  bool wait(double timeout_seconds);

  // Device operations: the coordinator publishes the event that ends the
  // operation's device work as soon as it has queued it (before complete()).
  void launched(std::shared_ptr<transport::DeviceEvent> done);
  // Blocks until launched() or complete(); returns the event, or null if the
  // operation completed without publishing one (it failed, or was not device work).
  std::shared_ptr<transport::DeviceEvent> wait_launched();

  // Results some collectives hand back. Written by the coordinator before
  // complete(); read by anyone after done().
  OutputBuffer output;          // allgather, alltoall: the output kolo allocated
  std::vector<int64_t> splits;  // allgather, alltoall: rows received from each rank
  int last_joined = -1;         // join: the last rank to join
  // Set at submission: the operation works on device memory.
  bool on_device = false;
  // Set at submission, by the world's WaitPolicy: how a waiter polls before it
  // sleeps (WaitFor::kHostHandle or kDeviceHandle), and who runs cycles for it
  // (null: the coordinator only).
  const WaitProfile* waits = &wait_profile(WaitFor::kHostHandle);
  std::shared_ptr<CycleHelper> helper;

  // Note [Where a small operation's time goes]: when the operation passed each
  // phase (kolo_handle_phases), in steady-clock nanoseconds; 0 where it has not.
  // Written by the submitting thread and then the thread running the cycle,
  // before complete(); read after done().
  enum Phase { kSubmitted, kCycleStarted, kNegotiated, kExecuting, kTransported, kCompleted,
               kNumPhases };
  void stamp(Phase phase, std::chrono::steady_clock::time_point at) {
    phases_[phase] = std::chrono::duration_cast<std::chrono::nanoseconds>(at.time_since_epoch())
                         .count();
  }
  const std::array<int64_t, kNumPhases>& phases() const { return phases_; }

 private:
  std::atomic<bool> done_{false};
  std::array<int64_t, kNumPhases> phases_{};
  Status status_;  // written once, before done_ is released
  std::shared_ptr<transport::DeviceEvent> done_event_;  // guarded by mu_
  std::mutex mu_;
  std::condition_variable cv_;
};

// Note [Where a small operation's time goes]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A small collective costs microseconds, most of it outside the data movement:
// the submit (checks, the queue, the doorbell), the wait for a cycle, the
// negotiation (on the cache's fast path one AND with every rank, so it includes
// waiting for the slowest), planning and the output's allocation, the transport,
// completing the handle and waking the waiter. Each handle carries the time it
// passed each phase (reusing the clock reads the flight recorder and the
// executor make anyway), and
// kolo-allreduce-perf --breakdown prints each phase's median per size, so that a
// change to the small-message path is judged phase by phase. The reads are
// shared where two phases end within a few hundred nanoseconds: a cycle's
// negotiation ends and its first bucket starts at one read (kNegotiated,
// kExecuting: to_transport then reads 0 for the first bucket, its planning
// counted in transport), a host bucket's transport ends and its entries
// complete at another (kTransported, kCompleted: to_complete reads 0), and a
// blocking call's cycle starts with its submission (kSubmitted, kCycleStarted).
// So a blocking call's cached allreduce reads the clock three times (submitted,
// negotiated, transported); an asynchronous one whose waiter runs the cycle
// five (the helper's look for news and the cycle's start besides).

}  // namespace kolo::core
