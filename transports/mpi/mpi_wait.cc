#include "transports/mpi/mpi_wait.h"

#include <sched.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include <algorithm>
#include <thread>

#include "transports/mpi/mpi_check.h"

namespace kolo::mpi {

namespace {
constexpr unsigned long kSleepSlackNs = 1000;
}  // namespace

Backoff::~Backoff() {
#ifdef __linux__
  if (slack_lowered_) prctl(PR_SET_TIMERSLACK, saved_slack_ns_, 0, 0, 0);
#endif
}

void Backoff::pause() {
  ++tests_;
  if (tests_ <= kSpinTests) return;
  const auto now = std::chrono::steady_clock::now();
  if (tests_ == kSpinTests + 1) yield_until_ = now + kYieldFor;
  if (now < yield_until_) {
    sched_yield();
    return;
  }
#ifdef __linux__
  if (!slack_lowered_) {
    int saved = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
    if (saved > 0 && prctl(PR_SET_TIMERSLACK, kSleepSlackNs, 0, 0, 0) == 0) {
      saved_slack_ns_ = static_cast<unsigned long>(saved);
      slack_lowered_ = true;
    }
  }
#endif
  std::this_thread::sleep_for(std::chrono::microseconds(sleep_us_));
  sleep_us_ = std::min<int64_t>(sleep_us_ * 2, kMaxSleep.count());
}

Status wait(MPI_Request* request, MPI_Status* status) {
  Backoff backoff;
  for (;;) {
    int done = 0;
    KOLO_MPI_CHECK(MPI_Test(request, &done, status));
    if (done) return Status::OK();
    backoff.pause();
  }
}

Status wait_all(MPI_Request* requests, int n) {
  // Waiting on each in turn costs nothing extra: a request that completed while
  // we waited on an earlier one passes its first test.
  for (int i = 0; i < n; ++i) KOLO_RETURN_IF_ERROR(wait(&requests[i]));
  return Status::OK();
}

bool wait_for_counter(const uint64_t* counter, uint64_t target, int spin_loads,
                      std::chrono::steady_clock::duration timeout) {
  for (int i = 0; i < spin_loads; ++i) {
    if (__atomic_load_n(counter, __ATOMIC_ACQUIRE) >= target) return true;
    __builtin_ia32_pause();
  }
  if (__atomic_load_n(counter, __ATOMIC_ACQUIRE) >= target) return true;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  Backoff backoff;  // yields, then sleeps: ranks may outnumber cores
  while (__atomic_load_n(counter, __ATOMIC_ACQUIRE) < target) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    backoff.pause();
  }
  return true;
}

Status wait_for(MPI_Request* request, std::chrono::steady_clock::duration timeout,
                bool* done) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  Backoff backoff;
  for (;;) {
    int flag = 0;
    KOLO_MPI_CHECK(MPI_Test(request, &flag, MPI_STATUS_IGNORE));
    *done = flag != 0;
    if (*done || std::chrono::steady_clock::now() >= deadline) return Status::OK();
    backoff.pause();
  }
}

}  // namespace kolo::mpi
