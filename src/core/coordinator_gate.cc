#include "core/coordinator_gate.h"

#include "core/coordinator.h"

namespace kolo::core {
namespace {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             CycleHelper::Clock::now().time_since_epoch())
      .count();
}

}  // namespace

void CycleGate::help(const HandleState& handle, Clock::time_point deadline) {
  helpers_.fetch_add(1, std::memory_order_acq_rel);
  keep_helping(handle, deadline, /*tried=*/false, /*ran=*/false);
}

bool CycleGate::run_here(TensorEntry& entry, Clock::time_point deadline,
                         const HandleMaker& make_handle, Status* refused, bool* alone) {
  *alone = false;
  helpers_.fetch_add(1, std::memory_order_acq_rel);
  std::shared_ptr<HandleState> handle;  // the entry moves into the cycle
  const HandleMaker give = [&](TensorEntry& e) {
    make_handle(e);
    handle = e.handle;
  };
  Coordinator::Helped helped;
  {
    std::unique_lock<std::mutex> lock(mu_, std::try_to_lock);
    if (!lock.owns_lock() || coordinator_ == nullptr) {
      helpers_.fetch_sub(1, std::memory_order_acq_rel);
      return false;
    }
    helped = coordinator_->run_alone(entry, give, refused);
    if (helped == Coordinator::Helped::kNotAlone) {
      if (entry.enqueued == Clock::time_point{}) entry.enqueued = Clock::now();
      give(entry);
      helped = coordinator_->run_with(entry, refused);
    }
  }
  if (helped == Coordinator::Helped::kAlone) {
    // As leave() with a handle done: the call's one clock read, at its end,
    // stands for the time this helper left.
    *alone = true;
    last_help_end_.store(std::chrono::duration_cast<std::chrono::nanoseconds>(
                             entry.enqueued.time_since_epoch())
                             .count(),
                         std::memory_order_release);
    helpers_.fetch_sub(1, std::memory_order_acq_rel);
    return true;
  }
  if (!refused->ok()) {
    helpers_.fetch_sub(1, std::memory_order_acq_rel);
    return true;
  }
  if (helped == Coordinator::Helped::kEnded) {
    leave(*handle);
    return true;
  }
  keep_helping(*handle, deadline, /*tried=*/true, helped == Coordinator::Helped::kRan);
  return true;
}

void CycleGate::keep_helping(const HandleState& handle, Clock::time_point deadline, bool tried,
                             bool ran) {
  // Looks for news between yields, as kHelperNews says, from the first pass or
  // the last one that ran a cycle: a cycle that completes the handle at once
  // costs no clock read here.
  Waiter idle(policy_.profile(WaitFor::kHelperNews), deadline);
  while (!handle.done()) {
    if (!tried) {
      ran = false;
      std::unique_lock<std::mutex> lock(mu_, std::try_to_lock);
      if (lock.owns_lock()) {
        if (coordinator_ == nullptr) break;
        const Coordinator::Helped helped = coordinator_->help_once();
        if (helped == Coordinator::Helped::kEnded) break;
        ran = helped == Coordinator::Helped::kRan;
        // Note [Crowded nodes wait in the kernel]: no looking for news there.
        if (helped == Coordinator::Helped::kIdle && policy_.helper_hands_back_when_idle()) break;
      }
      if (handle.done()) break;
    }
    tried = false;
    if (ran) idle.restart();
    if (!idle.pause_awake()) break;  // no news for a while, or the deadline passed
  }
  leave(handle);
}

void CycleGate::leave(const HandleState& handle) {
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
