#include "core/handle.h"

#include <chrono>

#include "common/backoff.h"
#include "common/check.h"

namespace kolo::core {
namespace {

// How long a waiter polls (a few checks, then yielding the core to anyone else
// runnable) before it sleeps on the condition variable. A small allreduce on one
// node completes in a few microseconds; polling that long saves a futex wake-up,
// which costs tens of microseconds in a VM. See Note [Spin, then yield, then sleep].
constexpr Backoff::Schedule kHostWait{8, std::chrono::microseconds(50), {}};
// Device operations take longer (the GPU's work, then the coordinator's poll);
// a waiter on one polls longer before it sleeps, for the same reason.
constexpr Backoff::Schedule kDeviceWait{8, std::chrono::milliseconds(2), {}};
// On a crowded node no yields: the thread that completes the handle needs the core.
constexpr Backoff::Schedule kCrowdedWait{8, std::chrono::microseconds(0), {}};

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
  using Clock = Backoff::Clock;
  const bool forever = timeout_seconds < 0;
  const auto deadline =
      forever ? Clock::time_point::max()
              : Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                   std::chrono::duration<double>(timeout_seconds));
  if (helper != nullptr && !done()) helper->help(*this, deadline);
  const bool crowded = helper != nullptr && helper->crowded();
  Backoff backoff(on_device ? kDeviceWait : crowded ? kCrowdedWait : kHostWait, deadline);
  while (!done()) {
    if (!backoff.pause_awake()) break;  // time to sleep, or the deadline passed
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
