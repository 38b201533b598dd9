// Backoff's schedule (spin, then yield for a while, then sleeps that double up to
// a cap) and its deadline.
#include "common/backoff.h"

#include <gtest/gtest.h>

#include <chrono>

namespace kolo {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;
using Clock = Backoff::Clock;
using Phase = Backoff::Phase;

TEST(Backoff, SpinsThenYieldsForItsTimeThenSleepsLongerUpToTheCap) {
  const Backoff::Schedule schedule{3, milliseconds(20), microseconds(16)};
  Backoff b(schedule);
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

TEST(Backoff, WithoutAYieldPhaseItSleepsRightAfterSpinning) {
  Backoff b(Backoff::Schedule{1, microseconds(0), microseconds(4)});
  EXPECT_TRUE(b.pause());
  EXPECT_EQ(b.phase(), Phase::kSleep);
  EXPECT_TRUE(b.pause());
  EXPECT_EQ(b.next_sleep(), microseconds(2));
}

TEST(Backoff, PauseAwakeStopsWhereSleepingWouldStart) {
  Backoff b(Backoff::Schedule{2, microseconds(0), std::chrono::hours(1)});
  EXPECT_TRUE(b.pause_awake());
  EXPECT_TRUE(b.pause_awake());
  EXPECT_FALSE(b.pause_awake());
  EXPECT_FALSE(b.pause_awake());
  EXPECT_EQ(b.next_sleep(), microseconds(1));  // it never slept
}

TEST(Backoff, APassedDeadlineStopsEveryPhaseAtOnce) {
  Backoff b(Backoff::kPeer, Clock::now() - microseconds(1));
  EXPECT_EQ(b.phase(), Phase::kSpin);
  EXPECT_FALSE(b.pause());
  EXPECT_FALSE(b.pause_awake());
  EXPECT_EQ(b.phase(), Phase::kSpin);  // nothing was counted
}

// Sleeps double without bound here (up to an hour); each is cut at the deadline,
// and pause() answers false from the deadline on.
TEST(Backoff, PausesUntilTheDeadlineAndNoSleepRunsPastIt) {
  const auto deadline = Clock::now() + milliseconds(30);
  Backoff b(Backoff::Schedule{4, microseconds(100), std::chrono::hours(1)}, deadline);
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

TEST(Backoff, WithoutADeadlineItNeverGivesUp) {
  Backoff b(Backoff::Schedule{2, microseconds(10), microseconds(2)});
  for (int i = 0; i < 200; ++i) ASSERT_TRUE(b.pause()) << i;
}

}  // namespace
}  // namespace kolo
