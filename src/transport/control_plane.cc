#include "transport/control_plane.h"

#include <algorithm>

namespace kolo::transport {

void ControlPlane::wait_for_ring(uint64_t cycle, std::chrono::microseconds timeout,
                                 std::chrono::microseconds poll) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + timeout;
  auto nap = std::chrono::microseconds(10);
  std::unique_lock<std::mutex> lock(wake_mu_);
  while (!woken_ && !rung(cycle)) {
    const auto now = Clock::now();
    if (now >= deadline) break;
    wake_cv_.wait_until(lock, std::min<Clock::time_point>(deadline, now + nap), [this] { return woken_; });
    nap = std::max(std::min(nap * 2, poll), std::chrono::microseconds(1));
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
