// The waiting policy (common/wait_policy.h): a Waiter's steps (spin, then yield
// for a while, then sleeps that double up to a cap), its deadline, the sleeps a
// caller takes itself, restarts; the policy's decisions for ordinary and crowded
// nodes; and the measured numbers of the profile table (docs/perf/waiting.md).
#include "common/wait_policy.h"

#include <gtest/gtest.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include <chrono>

namespace kolo {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;
using Clock = Waiter::Clock;
using Phase = Waiter::Phase;

WaitProfile profile(int spin, Clock::duration yield, Clock::duration max_sleep,
                    Clock::duration first_sleep = microseconds(1)) {
  WaitProfile p;
  p.spin_checks = spin;
  p.yield_for = std::chrono::duration_cast<microseconds>(yield);
  p.max_sleep = std::chrono::duration_cast<microseconds>(max_sleep);
  p.first_sleep = std::chrono::duration_cast<microseconds>(first_sleep);
  return p;
}

TEST(Waiter, SpinsThenYieldsForItsTimeThenSleepsLongerUpToTheCap) {
  Waiter b(profile(3, milliseconds(20), microseconds(16)));
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(b.phase(), Phase::kSpin) << i;
    EXPECT_TRUE(b.pause());
  }
  EXPECT_EQ(b.phase(), Phase::kYield);
  const auto first_yield = Clock::now();
  // pause_awake() yields like pause() and answers false where pause() would sleep.
  // (Looping on phase() instead races the clock: the yield phase may end between
  // phase() and pause(), and that pause() sleeps, doubling the next sleep.)
  int yields = 0;
  while (b.pause_awake()) ++yields;
  EXPECT_GE(yields, 1);
  EXPECT_GE(Clock::now() - first_yield, milliseconds(20));
  EXPECT_EQ(b.phase(), Phase::kSleep);
  for (int64_t want : {1, 2, 4, 8, 16, 16, 16}) {
    EXPECT_EQ(b.next_sleep(), microseconds(want));
    const auto before = Clock::now();
    EXPECT_TRUE(b.pause());
    EXPECT_GE(Clock::now() - before, microseconds(want));
  }
}

TEST(Waiter, WithoutAYieldPhaseItSleepsRightAfterSpinning) {
  Waiter b(profile(1, microseconds(0), microseconds(4)));
  EXPECT_TRUE(b.pause());
  EXPECT_EQ(b.phase(), Phase::kSleep);
  EXPECT_TRUE(b.pause());
  EXPECT_EQ(b.next_sleep(), microseconds(2));
}

TEST(Waiter, PauseAwakeStopsWhereSleepingWouldStart) {
  Waiter b(profile(2, microseconds(0), std::chrono::hours(1)));
  EXPECT_TRUE(b.pause_awake());
  EXPECT_TRUE(b.pause_awake());
  EXPECT_FALSE(b.pause_awake());
  EXPECT_FALSE(b.pause_awake());
  EXPECT_EQ(b.next_sleep(), microseconds(1));  // it never slept
}

TEST(Waiter, APassedDeadlineStopsEveryPhaseAtOnce) {
  Waiter b(wait_profile(WaitFor::kPeer), Clock::now() - microseconds(1));
  EXPECT_EQ(b.phase(), Phase::kSpin);
  EXPECT_FALSE(b.pause());
  EXPECT_FALSE(b.pause_awake());
  EXPECT_EQ(b.phase(), Phase::kSpin);  // nothing was counted
  EXPECT_EQ(b.take_sleep(), Clock::duration::zero());
}

// Sleeps double without bound here (up to an hour); each is cut at the deadline,
// and pause() answers false from the deadline on.
TEST(Waiter, PausesUntilTheDeadlineAndNoSleepRunsPastIt) {
  const auto deadline = Clock::now() + milliseconds(30);
  Waiter b(profile(4, microseconds(100), std::chrono::hours(1)), deadline);
  int pauses = 0;
  for (;;) {
    const auto before = Clock::now();
    const auto sleep = b.next_sleep();
    EXPECT_LE(sleep, deadline > before ? deadline - before : Clock::duration::zero())
        << "pause " << pauses;
    if (!b.pause()) break;
    ++pauses;
  }
  // Gave up no earlier than the deadline. (How many pauses fit before it depends
  // on how long this thread is descheduled: a count is no check here.)
  EXPECT_GE(Clock::now(), deadline);
  EXPECT_EQ(b.next_sleep(), Clock::duration::zero());
  EXPECT_FALSE(b.pause());
}

TEST(Waiter, WithoutADeadlineItNeverGivesUp) {
  Waiter b(profile(2, microseconds(10), microseconds(2)));
  for (int i = 0; i < 200; ++i) ASSERT_TRUE(b.pause()) << i;
}

// For a caller that sleeps its own way (a condition variable, a futex, the
// doorbell): each length is twice the last up to the cap, never past the
// deadline, zero from it on.
TEST(Waiter, TakeSleepGrowsToTheCapAndStopsAtTheDeadline) {
  Waiter grows(profile(0, microseconds(0), microseconds(100), microseconds(10)));
  for (int64_t want : {10, 20, 40, 80, 100, 100})
    EXPECT_EQ(grows.take_sleep(), microseconds(want));

  const auto deadline = Clock::now() + milliseconds(50);
  Waiter bounded(profile(0, microseconds(0), std::chrono::hours(1), std::chrono::hours(1)),
                 deadline);
  const auto first = bounded.take_sleep();
  EXPECT_GT(first, Clock::duration::zero());
  EXPECT_LE(first, milliseconds(50));
  Waiter passed(profile(0, microseconds(0), microseconds(100)), Clock::now() - microseconds(1));
  EXPECT_EQ(passed.take_sleep(), Clock::duration::zero());
}

// A zero cap (the poll interval may be 0) still sleeps 1 us at a time.
TEST(Waiter, AZeroCapSleepsOneMicrosecondAtATime) {
  Waiter naps(profile(0, microseconds(0), microseconds(0), microseconds(10)));
  EXPECT_EQ(naps.take_sleep(), microseconds(10));
  EXPECT_EQ(naps.take_sleep(), microseconds(1));
  EXPECT_EQ(naps.take_sleep(), microseconds(1));
}

TEST(Waiter, RestartGoesBackToTheSpinAndTheFirstSleep) {
  Waiter b(profile(2, microseconds(0), microseconds(64), microseconds(4)));
  EXPECT_TRUE(b.pause_awake());
  EXPECT_TRUE(b.pause_awake());
  EXPECT_FALSE(b.pause_awake());
  EXPECT_EQ(b.take_sleep(), microseconds(4));
  b.restart();
  EXPECT_EQ(b.phase(), Phase::kSpin);
  EXPECT_TRUE(b.pause_awake());
  EXPECT_TRUE(b.pause_awake());
  EXPECT_FALSE(b.pause_awake());
  EXPECT_EQ(b.take_sleep(), microseconds(4));
}

// restart(t): the spin is over and the yields count from t, so a wait that began
// its yields long enough ago sleeps at once.
TEST(Waiter, RestartAtATimeCountsTheYieldsFromThere) {
  Waiter b(profile(5, milliseconds(10), microseconds(0)));
  b.restart(Clock::now() - milliseconds(20));
  EXPECT_EQ(b.phase(), Phase::kSleep);
  EXPECT_FALSE(b.pause_awake(Clock::now()));
  b.restart(Clock::now());
  EXPECT_EQ(b.phase(), Phase::kYield);
  EXPECT_TRUE(b.pause_awake(Clock::now()));
}

// use(): another profile from where the wait is; its yields count from the
// same start (the coordinator switches to kDeviceInFlight when device work is
// in flight).
TEST(Waiter, UseKeepsTheYieldsStart) {
  Waiter b(profile(0, microseconds(0), microseconds(0)));
  const auto start = Clock::now();
  b.restart(start);
  EXPECT_FALSE(b.pause_awake(start + microseconds(10)));
  b.use(profile(0, milliseconds(1), microseconds(0)));
  EXPECT_TRUE(b.pause_awake(start + microseconds(10)));
  EXPECT_FALSE(b.pause_awake(start + milliseconds(2)));
}

#ifdef __linux__
// Naps lower the thread's timer slack (a 1 us sleep is otherwise padded by 50
// us), and the Waiter's end restores it; sleeps the caller takes leave it alone.
TEST(Waiter, NapsLowerTheTimerSlackUntilTheWaitEnds) {
  const int before = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
  if (before <= 1000) GTEST_SKIP() << "the thread's timer slack is already 1 us or less";
  {
    Waiter own(profile(0, microseconds(0), microseconds(8)));
    own.take_sleep();
    EXPECT_EQ(prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0), before);
    Waiter b(profile(0, microseconds(0), microseconds(2)));
    EXPECT_TRUE(b.pause());
    EXPECT_EQ(prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0), 1000);
  }
  EXPECT_EQ(prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0), before);
}
#endif

using Node = WaitPolicy::Node;

TEST(WaitPolicy, ANodeIsCrowdedWithMoreRanksThanCpus) {
  EXPECT_FALSE(WaitPolicy(Node{2, 2, true}).crowded());
  EXPECT_TRUE(WaitPolicy(Node{3, 2, true}).crowded());
  EXPECT_TRUE(WaitPolicy(Node{2, 0, true}).crowded());  // unknown CPUs count as one
  EXPECT_FALSE(WaitPolicy().crowded());
}

// Note [Crowded nodes wait in the kernel]: there the coordinator and a host
// handle's waiter go to sleep without yielding, the coordinator does not doze
// after the helpers left, and a helper without news hands back; waits between
// ranks still yield first (a futex round trip costs ten yields).
TEST(WaitPolicy, CrowdedNodesSleepAtOnceButPeerWaitsStillYield) {
  const WaitPolicy roomy(Node{2, 2, true}), crowded(Node{4, 2, true});
  for (WaitFor no_yields : {WaitFor::kHostHandle, WaitFor::kNews}) {
    EXPECT_GT(roomy.profile(no_yields).yield_for.count(), 0);
    EXPECT_EQ(crowded.profile(no_yields).yield_for.count(), 0);
    EXPECT_EQ(crowded.profile(no_yields).spin_checks, roomy.profile(no_yields).spin_checks);
  }
  for (WaitFor same : {WaitFor::kPeer, WaitFor::kCounter, WaitFor::kDeviceHandle,
                       WaitFor::kDeviceInFlight, WaitFor::kHelperNews, WaitFor::kDoze}) {
    EXPECT_EQ(crowded.profile(same).yield_for, roomy.profile(same).yield_for);
    EXPECT_EQ(crowded.profile(same).max_sleep, roomy.profile(same).max_sleep);
  }
  EXPECT_EQ(roomy.doze_window(), milliseconds(1));
  EXPECT_EQ(crowded.doze_window(), microseconds(0));
  EXPECT_FALSE(roomy.helper_hands_back_when_idle());
  EXPECT_TRUE(crowded.helper_hands_back_when_idle());
  // wait_profile() is the ordinary column.
  EXPECT_EQ(&wait_profile(WaitFor::kNews), &roomy.profile(WaitFor::kNews));
}

// Note [The waiter runs the cycle]: only where the idle checks are local, and
// only for host work.
TEST(WaitPolicy, TheWaiterRunsTheCycleOnlyForHostWorkWithLocalIdleChecks) {
  EXPECT_TRUE(WaitPolicy(Node{2, 2, true}).waiter_runs_cycle(false));
  EXPECT_FALSE(WaitPolicy(Node{2, 2, true}).waiter_runs_cycle(true));
  EXPECT_FALSE(WaitPolicy(Node{2, 2, false}).waiter_runs_cycle(false));
  EXPECT_TRUE(WaitPolicy(Node{4, 2, true}).waiter_runs_cycle(false));  // crowded too
}

// The measured numbers (docs/perf/waiting.md): changing one is a decision to
// make there, with a run, not here.
TEST(WaitPolicy, TheProfilesKeepTheirMeasuredNumbers) {
  struct Want {
    WaitFor what;
    int spin;
    int64_t yield_us, max_sleep_us, first_sleep_us;
  };
  const Want wants[] = {
      {WaitFor::kPeer, 32, 500, 50, 1},          {WaitFor::kCounter, 32, 500, 2000, 2000},
      {WaitFor::kDeviceStream, 0, 50, 20, 1},    {WaitFor::kHostHandle, 8, 50, 0, 1},
      {WaitFor::kDeviceHandle, 8, 2000, 0, 1},   {WaitFor::kNews, 0, 50, 0, 1},
      {WaitFor::kDeviceInFlight, 0, 2000, 1000, 1}, {WaitFor::kHelperNews, 0, 50, 0, 1},
      {WaitFor::kDoze, 0, 0, 800, 100},          {WaitFor::kRingPoll, 0, 0, 0, 10},
  };
  for (const Want& w : wants) {
    const WaitProfile& p = wait_profile(w.what);
    SCOPED_TRACE(static_cast<int>(w.what));
    EXPECT_EQ(p.spin_checks, w.spin);
    EXPECT_EQ(p.yield_for.count(), w.yield_us);
    EXPECT_EQ(p.max_sleep.count(), w.max_sleep_us);
    EXPECT_EQ(p.first_sleep.count(), w.first_sleep_us);
  }
}

}  // namespace
}  // namespace kolo
