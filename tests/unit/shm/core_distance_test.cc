// RecalibrationClock (core_distance.h): when the shm engines measure the cores'
// distance again, by calls and by bytes (Note [Measuring again by bytes]).
#include "transports/shm/core_distance.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace kolo::shm {
namespace {

// The calls, of `bytes` each, at which the clock measures, among the first `calls`.
std::vector<int> due_calls(uint64_t bytes, int calls) {
  RecalibrationClock clock;
  std::vector<int> due;
  for (int i = 0; i < calls; ++i) {
    if (clock.due(bytes)) due.push_back(i);
  }
  return due;
}

TEST(RecalibrationClock, SmallCallsMeasureEvery64) {
  EXPECT_EQ(due_calls(4 << 10, 200), (std::vector<int>{0, 64, 128, 192}));
  EXPECT_EQ(due_calls(uint64_t{4} << 20, 130), (std::vector<int>{0, 64, 128}));  // 256 MiB per 64
}

// A run of large calls measured only once in 64 missed the VM moving its vCPUs.
TEST(RecalibrationClock, LargeCallsMeasureEvery256MiB) {
  EXPECT_EQ(due_calls(uint64_t{128} << 20, 7), (std::vector<int>{0, 2, 4, 6}));
  EXPECT_EQ(due_calls(uint64_t{100} << 20, 7), (std::vector<int>{0, 3, 6}));
  EXPECT_EQ(due_calls(uint64_t{1} << 30, 3), (std::vector<int>{0, 1, 2}));
}

// Calls of any sizes: whichever limit comes first, counted from the last measurement.
TEST(RecalibrationClock, MixedSizesCountFromTheLastMeasurement) {
  RecalibrationClock clock;
  EXPECT_TRUE(clock.due(1 << 10));
  for (int i = 1; i < 10; ++i) EXPECT_FALSE(clock.due(1 << 10)) << i;
  EXPECT_FALSE(clock.due((uint64_t{256} << 20) - (10 << 10) - 1));  // a byte short of 256 MiB
  EXPECT_FALSE(clock.due(1));                                         // 256 MiB
  EXPECT_TRUE(clock.due(1 << 10));
  for (int i = 1; i < 64; ++i) EXPECT_FALSE(clock.due(1 << 10)) << i;
  EXPECT_TRUE(clock.due(1 << 10));  // 64 calls
}

}  // namespace
}  // namespace kolo::shm
