#include "transport/control_plane.h"

#include "common/check.h"
#include "common/wait_policy.h"

namespace kolo::transport {

Status ControlPlane::ring_and(uint64_t cycle, std::vector<uint64_t>* bits) {
  if (!rung(cycle)) KOLO_RETURN_IF_ERROR(ring(cycle));
  return bitwise_and(bits);
}

void ControlPlane::wait_for_ring(uint64_t cycle, std::chrono::microseconds timeout,
                                 std::chrono::microseconds poll) {
  // Naps as WaitFor::kRingPoll says, up to the poll interval.
  WaitProfile naps = wait_profile(WaitFor::kRingPoll);
  naps.max_sleep = poll;
  Waiter waiter(naps, std::chrono::steady_clock::now() + timeout);
  std::unique_lock<std::mutex> lock(wake_mu_);
  while (!woken_ && !rung(cycle)) {
    const auto nap = waiter.take_sleep();  // zero once the timeout has passed
    if (nap <= nap.zero()) break;
    wake_cv_.wait_for(lock, nap, [this] { return woken_; });
  }
  woken_ = false;
}

void ControlPlane::wake() {
  {
    std::lock_guard<std::mutex> lock(wake_mu_);
    woken_ = true;
  }
  wake_cv_.notify_one();
}

}  // namespace kolo::transport
