// Backoff: how a kolo thread waits for something another thread or process will
// do — an MPI request, a counter in shared memory, a CUDA event, a handle. The
// caller checks its condition and calls pause() after each unsuccessful check:
//
//   checks 1..spin_checks   pause() returns at once (a fast answer comes here)
//   then for yield_for      sched_yield() (hands the core to a runnable peer)
//   then                    sleep, 1 µs doubling up to max_sleep
//
// Note [Spin, then yield, then sleep]
// Small collectives complete in microseconds, so a waiter first polls: a sleep
// or a futex wake-up costs tens of microseconds in a VM. Ranks may outnumber cores
// (4 ranks on 2 cores in CI, or ranks beside framework threads), so the poll
// yields: a spinning rank would steal the core its peer needs to answer, and a
// yield costs nothing when no one else is runnable. Past the yield phase the peer
// is idle, not slow: sleep, and leave the core alone. Sleeps stay short (max_sleep)
// so that a wait that ends late costs at most one sleep of latency. docs/perf has
// the measurements behind the default schedule.
//
// Linux pads every sleep by the thread's timer slack (50 µs by default; a 1 µs
// sleep measured 109 µs on a loaded 2-core machine, 17 µs with a 1 µs slack), so
// while a Backoff sleeps it lowers the calling thread's slack to 1 µs, and the
// destructor restores it.
//
// A Backoff belongs to one wait on one thread; it is not thread-safe.
#pragma once

#include <chrono>
#include <cstdint>

namespace kolo {

class Backoff {
 public:
  using Clock = std::chrono::steady_clock;

  struct Schedule {
    int spin_checks;
    std::chrono::microseconds yield_for;  // measured from the first yield
    std::chrono::microseconds max_sleep;
  };
  // The schedule for waits on peers (MPI requests, shared-memory counters):
  // 4 ranks on 2 busy cores, 8 B through the "mpi" transport, took 22 to 350 µs
  // with 64 yields before sleeping and 15-16 µs with 500 µs of yields.
  static constexpr Schedule kPeer{32, std::chrono::microseconds(500),
                                  std::chrono::microseconds(50)};

  enum class Phase { kSpin, kYield, kSleep };

  // Without a deadline, pause() always pauses; with one, see pause().
  explicit Backoff(const Schedule& schedule = kPeer,
                   Clock::time_point deadline = Clock::time_point::max());
  Backoff(const Backoff&) = delete;
  Backoff& operator=(const Backoff&) = delete;
  ~Backoff();  // restores the thread's timer slack if a sleep lowered it

  // One unsuccessful check: returns at once, yields or sleeps, per the schedule.
  // A sleep never runs past the deadline. Answers false, without pausing, once
  // the deadline has passed.
  bool pause();

  // Like pause(), but answers false instead of sleeping: for a caller with its
  // own way to sleep (a condition variable) once spinning and yielding are over.
  bool pause_awake();

  // The phase the next pause() is in.
  Phase phase() const;
  // Whether the spin is over (the next pause yields or sleeps); reads no clock.
  bool done_spinning() const { return checks_ >= schedule_.spin_checks; }
  // How long a sleep starting now would be (never past the deadline).
  Clock::duration next_sleep() const { return sleep_length(Clock::now()); }

 private:
  bool step(bool may_sleep);
  Clock::duration sleep_length(Clock::time_point now) const;
  void sleep(Clock::time_point now);

  const Schedule schedule_;
  const Clock::time_point deadline_;
  const bool has_deadline_;
  int checks_ = 0;
  Clock::time_point yield_until_;
  int64_t sleep_us_ = 1;
  bool slack_lowered_ = false;
  unsigned long saved_slack_ns_ = 0;
};

}  // namespace kolo
