// The sampling around the search: warm-up samples discarded, a settle cycle after
// each change, samples scored by bytes per second over whole cycles, and a log
// row for each sample and for the freeze.
#include "tune/autotuner.h"

#include <gtest/gtest.h>

namespace kolo::tune {
namespace {

Space small_space() {
  std::vector<Dimension> dims;
  dims.push_back(numeric_dimension("FUSION", {1 << 20, 4 << 20, 16 << 20}, 1 << 20, 64 << 20));
  dims.push_back(Dimension{"ORDER", {}, {"auto", "mpi"}});
  return Space(std::move(dims));
}

TEST(AutotunerTest, DiscardsWarmupAndScoresBytesPerSecond) {
  AutotuneOptions options;
  options.warmup_samples = 2;
  options.sample_seconds = 1.0;
  Autotuner tuner(small_space(), {0, 0}, options);
  double t = 0;
  EXPECT_FALSE(tuner.cycle_done(0, t));  // starts the clock
  // Two warm-up samples: no change of setting.
  for (int i = 0; i < 2; ++i) {
    EXPECT_FALSE(tuner.cycle_done(100, t += 0.5));
    EXPECT_FALSE(tuner.cycle_done(100, t += 0.5));
  }
  auto rows = tuner.take_rows();
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].phase, "warmup");
  EXPECT_EQ(rows[1].phase, "warmup");
  EXPECT_DOUBLE_EQ(rows[1].score, 200.0);
  // The first scored sample: 300 bytes in 1.5 s (an idle cycle counts its time).
  EXPECT_FALSE(tuner.cycle_done(0, t += 0.5));
  EXPECT_FALSE(tuner.cycle_done(150, t += 0.25));
  const bool changed = tuner.cycle_done(150, t += 0.75);
  rows = tuner.take_rows();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].phase, "sample");
  EXPECT_EQ(rows[0].bytes, 300u);
  EXPECT_EQ(rows[0].cycles, 3u);
  EXPECT_DOUBLE_EQ(rows[0].score, 200.0);
  EXPECT_TRUE(changed);  // the space-filling design moves on
  EXPECT_NE(tuner.current(), (Point{0, 0}));
  // The first cycle at the new setting settles and is not measured, however long.
  EXPECT_FALSE(tuner.cycle_done(1000000, t += 5));
  tuner.cycle_done(10, t += 1);  // a whole sample: 10 bytes in 1 s
  rows = tuner.take_rows();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].bytes, 10u);
  EXPECT_DOUBLE_EQ(rows[0].score, 10.0);
}

// Fusion 16M with order auto is best; the tuner freezes there and says so once.
TEST(AutotunerTest, FreezesAtTheBest) {
  AutotuneOptions options;
  options.warmup_samples = 0;
  options.sample_seconds = 1.0;
  options.search.max_samples = 12;
  Autotuner tuner(small_space(), {0, 1}, options);
  double t = 0;
  tuner.cycle_done(0, t);
  int changes = 0;
  for (int cycle = 0; cycle < 1000 && !tuner.frozen(); ++cycle) {
    const Point& p = tuner.current();
    const uint64_t bytes = static_cast<uint64_t>(100 + 50 * p[0] - 30 * p[1]);
    changes += tuner.cycle_done(bytes, t += 1.0) ? 1 : 0;
  }
  ASSERT_TRUE(tuner.frozen());
  EXPECT_EQ(tuner.current(), (Point{2, 0}));
  EXPECT_GE(changes, 1);
  const auto rows = tuner.take_rows();
  ASSERT_FALSE(rows.empty());
  EXPECT_EQ(rows.back().phase, "frozen");
  EXPECT_EQ(rows.back().point, (Point{2, 0}));
  EXPECT_FALSE(tuner.cycle_done(100, t += 1.0));  // frozen: nothing changes any more
}

// A sample ends only at rest (whole steps), unless it runs 4 x sample_seconds;
// settling after a change also lasts until rest.
TEST(AutotunerTest, SamplesEndAtRest) {
  AutotuneOptions options;
  options.warmup_samples = 0;
  options.sample_seconds = 1.0;
  Autotuner tuner(small_space(), {0, 0}, options);
  double t = 0;
  tuner.cycle_done(0, t);
  EXPECT_FALSE(tuner.cycle_done(100, t += 1.5, false));  // mid-step: goes on
  EXPECT_TRUE(tuner.take_rows().empty());
  EXPECT_TRUE(tuner.cycle_done(100, t += 0.5, true));  // rest: 200 bytes in 2 s
  auto rows = tuner.take_rows();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_DOUBLE_EQ(rows[0].score, 100.0);
  EXPECT_FALSE(tuner.cycle_done(100, t += 1, false));  // settling: bytes, not at rest
  EXPECT_FALSE(tuner.cycle_done(0, t += 1, true));     // settled here
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(tuner.cycle_done(10, t += 1, false));
  tuner.cycle_done(10, t += 1, false);  // never at rest: ends at 4 x sample_seconds
  rows = tuner.take_rows();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].bytes, 40u);
  EXPECT_DOUBLE_EQ(rows[0].seconds, 4.0);
}

TEST(AutotunerTest, FrozenAtDoesNotSearch) {
  Autotuner tuner = Autotuner::frozen_at(small_space(), {1, 1});
  EXPECT_TRUE(tuner.frozen());
  EXPECT_EQ(tuner.current(), (Point{1, 1}));
  EXPECT_FALSE(tuner.cycle_done(100, 0));
  EXPECT_FALSE(tuner.cycle_done(100, 10));
  EXPECT_TRUE(tuner.take_rows().empty());
}

}  // namespace
}  // namespace kolo::tune
