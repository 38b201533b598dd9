#include "core/coordinator_gate.h"

#include <sched.h>

#include "core/coordinator.h"

namespace kolo::core {
namespace {

// How long a helper looks for news (the peer's ring, its own submission) before
// it leaves the rest to the coordinator: as long as the coordinator's own spin.
constexpr auto kHelpIdle = std::chrono::microseconds(50);

}  // namespace

void CycleGate::help(const HandleState& handle, Clock::time_point deadline) {
  helpers_.fetch_add(1, std::memory_order_acq_rel);
  auto idle_since = Clock::now();
  while (!handle.done()) {
    {
      std::unique_lock<std::mutex> lock(mu_, std::try_to_lock);
      if (lock.owns_lock()) {
        if (coordinator_ == nullptr) break;
        const Coordinator::Helped helped = coordinator_->help_once();
        if (helped == Coordinator::Helped::kEnded) break;
        if (helped == Coordinator::Helped::kRan) idle_since = Clock::now();
      }
    }
    if (handle.done()) break;
    const auto now = Clock::now();
    if (now >= deadline || now - idle_since > kHelpIdle) break;
    sched_yield();
  }
  {
    std::lock_guard<std::mutex> lock(idle_mu_);
    helpers_.fetch_sub(1, std::memory_order_acq_rel);
  }
  idle_cv_.notify_all();
}

void CycleGate::wait_no_helpers(std::chrono::microseconds timeout) {
  std::unique_lock<std::mutex> lock(idle_mu_);
  idle_cv_.wait_for(lock, timeout, [this] { return !helping(); });
}

}  // namespace kolo::core
