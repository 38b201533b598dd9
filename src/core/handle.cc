#include "core/handle.h"

#include <chrono>

#include "common/check.h"

namespace kolo::core {
namespace {

const std::string kEmpty;

}  // namespace

void HandleState::complete(Status status) {
  complete(std::move(status), std::chrono::steady_clock::now());
}

void HandleState::complete(Status status, std::chrono::steady_clock::time_point at) {
  KOLO_CHECK(!done());
  stamp(kCompleted, at);
  status_ = std::move(status);
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_.store(true, std::memory_order_release);
  }
  cv_.notify_all();
}

void HandleState::launched(std::shared_ptr<transport::DeviceEvent> done) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_event_ = std::move(done);
  }
  cv_.notify_all();
}

std::shared_ptr<transport::DeviceEvent> HandleState::wait_launched() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return done_event_ != nullptr || done(); });
  return done_event_;
}

const std::string& HandleState::message() const {
  return done() ? status_.message() : kEmpty;
}

bool HandleState::wait(double timeout_seconds) {
  using Clock = Waiter::Clock;
  const bool forever = timeout_seconds < 0;
  const auto deadline =
      forever ? Clock::time_point::max()
              : Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                   std::chrono::duration<double>(timeout_seconds));
  if (helper != nullptr && !done()) helper->help(*this, deadline);
  Waiter waiter(*waits, deadline);
  while (!done()) {
    if (!waiter.pause_awake()) break;  // time to sleep, or the deadline passed
  }
  if (done()) return true;
  std::unique_lock<std::mutex> lock(mu_);
  if (forever) {
    cv_.wait(lock, [this] { return done(); });
    return true;
  }
  return cv_.wait_until(lock, deadline, [this] { return done(); });
}

}  // namespace kolo::core
