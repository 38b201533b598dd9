#include "core/coordinator_gate.h"

#include <sched.h>

#include "core/coordinator.h"

namespace kolo::core {
namespace {

// How long a helper looks for news (the peer's ring, its own submission) before
// it leaves the rest to the coordinator: as long as the coordinator's own spin.
constexpr auto kHelpIdle = std::chrono::microseconds(50);

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             CycleHelper::Clock::now().time_since_epoch())
      .count();
}

}  // namespace

void CycleGate::help(const HandleState& handle, Clock::time_point deadline) {
  helpers_.fetch_add(1, std::memory_order_acq_rel);
  // The idle time counts from the last pass that ran a cycle (or the first
  // pass): a cycle that completes the handle at once costs no clock read here.
  Clock::time_point idle_since{};
  while (!handle.done()) {
    bool ran = false;
    {
      std::unique_lock<std::mutex> lock(mu_, std::try_to_lock);
      if (lock.owns_lock()) {
        if (coordinator_ == nullptr) break;
        const Coordinator::Helped helped = coordinator_->help_once();
        if (helped == Coordinator::Helped::kEnded) break;
        ran = helped == Coordinator::Helped::kRan;
        // Note [Crowded nodes wait in the kernel]: no polling for news here.
        if (helped == Coordinator::Helped::kIdle && crowded_) break;
      }
    }
    if (handle.done()) break;
    const auto now = Clock::now();
    if (ran || idle_since == Clock::time_point{}) idle_since = now;
    if (now >= deadline || now - idle_since > kHelpIdle) break;
    sched_yield();
  }
  if (handle.done()) {
    // The common case costs no lock and no wake-up: the coordinator dozes on.
    // The handle's completion stamp (the same clock, written before done) stands
    // for the time this helper left: no clock read of its own.
    last_help_end_.store(handle.phases()[HandleState::kCompleted], std::memory_order_release);
    helpers_.fetch_sub(1, std::memory_order_acq_rel);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(idle_mu_);
    last_help_end_.store(0, std::memory_order_release);
    handed_back_ = true;
    helpers_.fetch_sub(1, std::memory_order_acq_rel);
  }
  idle_cv_.notify_all();
}

bool CycleGate::helped_within(std::chrono::microseconds window) const {
  if (helping()) return true;
  const int64_t last = last_help_end_.load(std::memory_order_acquire);
  return last != 0 && now_ns() - last < static_cast<int64_t>(window.count()) * 1000;
}

bool CycleGate::doze(std::chrono::microseconds timeout) {
  std::unique_lock<std::mutex> lock(idle_mu_);
  ++dozers_;
  const bool handed_back = idle_cv_.wait_for(lock, timeout, [this] { return handed_back_; });
  --dozers_;
  handed_back_ = false;
  return handed_back;
}

bool CycleGate::dozing() {
  std::lock_guard<std::mutex> lock(idle_mu_);
  return dozers_ > 0;
}

}  // namespace kolo::core
