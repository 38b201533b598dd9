#include "common/backoff.h"

#include <sched.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include <algorithm>
#include <thread>

namespace kolo {
namespace {

constexpr unsigned long kSleepSlackNs = 1000;

}  // namespace

Backoff::Backoff(const Schedule& schedule, Clock::time_point deadline)
    : schedule_(schedule), deadline_(deadline), has_deadline_(deadline != Clock::time_point::max()) {}

Backoff::~Backoff() {
#ifdef __linux__
  if (slack_lowered_) prctl(PR_SET_TIMERSLACK, saved_slack_ns_, 0, 0, 0);
#endif
}

bool Backoff::pause() { return step(true); }

bool Backoff::pause_awake() { return step(false); }

Backoff::Phase Backoff::phase() const {
  if (checks_ < schedule_.spin_checks) return Phase::kSpin;
  if (checks_ == schedule_.spin_checks)  // the yield phase has not started
    return schedule_.yield_for.count() > 0 ? Phase::kYield : Phase::kSleep;
  return Clock::now() < yield_until_ ? Phase::kYield : Phase::kSleep;
}

bool Backoff::step(bool may_sleep) {
  const bool spinning = checks_ < schedule_.spin_checks;
  // The spin phase reads no clock unless there is a deadline to keep.
  const Clock::time_point now = spinning && !has_deadline_ ? Clock::time_point() : Clock::now();
  if (has_deadline_ && now >= deadline_) return false;
  if (spinning) {
    ++checks_;
    return true;
  }
  if (checks_ == schedule_.spin_checks) {  // the first pause after spinning
    yield_until_ = now + schedule_.yield_for;
    ++checks_;  // stops here: a long wait does not overflow it
  }
  if (now < yield_until_) {
    sched_yield();
    return true;
  }
  if (!may_sleep) return false;
  sleep(now);
  return true;
}

Backoff::Clock::duration Backoff::sleep_length(Clock::time_point now) const {
  const Clock::duration length = std::chrono::microseconds(sleep_us_);
  if (!has_deadline_) return length;
  return std::max(Clock::duration::zero(), std::min<Clock::duration>(length, deadline_ - now));
}

void Backoff::sleep(Clock::time_point now) {
#ifdef __linux__
  if (!slack_lowered_) {
    const int saved = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
    if (saved > 0 && prctl(PR_SET_TIMERSLACK, kSleepSlackNs, 0, 0, 0) == 0) {
      saved_slack_ns_ = static_cast<unsigned long>(saved);
      slack_lowered_ = true;
    }
  }
#endif
  std::this_thread::sleep_for(sleep_length(now));
  sleep_us_ = std::min<int64_t>(sleep_us_ * 2, schedule_.max_sleep.count());
}

}  // namespace kolo
