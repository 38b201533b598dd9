// TensorQueue: where user threads hand tensors to the coordinator.
//
// Any thread may push(); only the coordinator drains. The queue also owns the set
// of names in flight on this rank (from push until the coordinator calls
// finish()), so a second submission of a name still in flight is refused at
// once with KOLO_ERR_DUPLICATE_NAME. After close(), every push is refused with the
// status given to close().
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include "common/dtype.h"
#include "common/status.h"
#include "core/handle.h"
#include "core/request.h"
#include "core/spare_nodes.h"

namespace kolo::core {

using Clock = std::chrono::steady_clock;

struct TensorEntry {
  struct Member {  // one tensor of a group
    const void* input;
    void* output;
    int64_t elements;
  };
  Request request;
  const void* input = nullptr;
  void* output = nullptr;
  std::vector<Member> members;  // groups only
  Device device;
  // Device tensors: the point on the caller's stream after which the inputs are
  // ready, recorded at submission (Note [Device streams]); null otherwise.
  std::shared_ptr<transport::DeviceEvent> ready;
  // A joined rank's device zeros (the entry's input and output), kept alive with
  // the entry until its work completes. Null otherwise.
  std::shared_ptr<char> zeros;
  std::shared_ptr<HandleState> handle;
  Clock::time_point enqueued;
  uint64_t flight = 0;  // the operation's number in the flight recorder; 0: none
};

class TensorQueue {
 public:
  // Refuses duplicates and pushes after close(); on success the entry is queued
  // and the coordinator is woken.
  Status push(TensorEntry entry);

  // The name is in flight from now on, refused as push() would refuse it, but
  // nothing is queued and nobody is woken: for a caller that hands its entry to
  // the coordinator's cycle itself (Note [A blocking call enters the cycle] in
  // core/coordinator_gate.h), which then calls finish() as for a pushed one.
  Status admit(const std::string& name);

  // Moves every queued entry, oldest first, into `out` (which must be empty).
  // Coordinator only. The two vectors swap storage, so a caller that clears
  // and passes the same `out` each cycle keeps both allocations.
  void drain(std::vector<TensorEntry>* out);

  // The name is no longer in flight. Call before completing its handle, so that a
  // caller who waits and resubmits the name at once is not refused.
  void finish(const std::string& name);

  // Refuses future pushes with `reason`; returns what was still queued.
  std::vector<TensorEntry> close(Status reason);

  bool has_queued() const { return queued_.load(std::memory_order_acquire) > 0; }

  // How many names are in flight (pushed, not yet finished). Any thread.
  size_t in_flight() const {
    std::lock_guard<std::mutex> lock(mu_);
    return in_flight_.size();
  }

  // Called after every push and by wake(), from the pushing thread: the
  // coordinator sets it to end its idle wait (ControlPlane::wake), and clears it
  // (null) before the control plane goes; no call runs past set_waker.
  void set_waker(std::function<void()> waker);
  void wake();

 private:
  Status admit_locked(const std::string& name);  // mu_ held

  mutable std::mutex mu_;
  std::mutex waker_mu_;  // a waker call and set_waker never overlap
  std::function<void()> waker_;
  std::vector<TensorEntry> queue_;
  std::unordered_set<std::string> in_flight_;
  SpareNodes<std::unordered_set<std::string>> spare_names_;  // finished names, for push()
  std::atomic<size_t> queued_{0};
  bool closed_ = false;
  Status close_reason_;
};

}  // namespace kolo::core
