#include "core/fusion_planner.h"

#include <gtest/gtest.h>

#include <random>

namespace kolo::core {
namespace {

std::vector<PlanItem> items_of(std::initializer_list<std::pair<size_t, int>> list) {
  std::vector<PlanItem> out;
  for (auto [bytes, cls] : list) out.push_back(PlanItem{bytes, cls});
  return out;
}

std::vector<std::vector<size_t>> indices(const std::vector<PlannedBucket>& buckets) {
  std::vector<std::vector<size_t>> out;
  for (const auto& b : buckets) out.push_back(b.items);
  return out;
}

// The invariants stated in fusion_planner.h, for any input.
void check_invariants(const std::vector<PlanItem>& items, size_t threshold,
                      const std::vector<PlannedBucket>& buckets) {
  std::vector<int> seen(items.size(), 0);
  size_t last_first = 0;
  for (size_t b = 0; b < buckets.size(); ++b) {
    const auto& bucket = buckets[b];
    ASSERT_FALSE(bucket.items.empty());
    if (b > 0) {
      EXPECT_GT(bucket.items[0], last_first);
    }
    last_first = bucket.items[0];
    size_t bytes = 0;
    for (size_t k = 0; k < bucket.items.size(); ++k) {
      size_t i = bucket.items[k];
      ++seen[i];
      bytes += items[i].bytes;
      EXPECT_EQ(items[i].fusion_class, items[bucket.items[0]].fusion_class);
      if (k > 0) {
        EXPECT_GT(i, bucket.items[k - 1]);
      }
    }
    EXPECT_EQ(bytes, bucket.bytes);
    if (bucket.items.size() > 1) {
      EXPECT_GT(threshold, 0u);
      EXPECT_LE(bytes, threshold);
    }
  }
  for (int s : seen) EXPECT_EQ(s, 1);
}

TEST(FusionPlanner, EmptyInputGivesNoBuckets) { EXPECT_TRUE(plan_buckets({}, 1024).empty()); }

TEST(FusionPlanner, FusesSameClassUpToThreshold) {
  auto items = items_of({{100, 0}, {100, 0}, {100, 0}, {100, 0}});
  EXPECT_EQ(indices(plan_buckets(items, 250)), (std::vector<std::vector<size_t>>{{0, 1}, {2, 3}}));
  EXPECT_EQ(indices(plan_buckets(items, 400)), (std::vector<std::vector<size_t>>{{0, 1, 2, 3}}));
}

TEST(FusionPlanner, ThresholdZeroDisablesFusion) {
  auto items = items_of({{1, 0}, {1, 0}, {1, 0}});
  EXPECT_EQ(indices(plan_buckets(items, 0)), (std::vector<std::vector<size_t>>{{0}, {1}, {2}}));
}

TEST(FusionPlanner, LargeItemGoesAloneAndDoesNotBlockSmallerOnes) {
  // Item 1 does not fit next to item 0; item 2 still joins item 0 (look-ahead).
  auto items = items_of({{60, 0}, {50, 0}, {40, 0}, {5000, 0}});
  EXPECT_EQ(indices(plan_buckets(items, 100)),
            (std::vector<std::vector<size_t>>{{0, 2}, {1}, {3}}));
}

TEST(FusionPlanner, ClassesNeverMix) {
  auto items = items_of({{10, 0}, {10, 1}, {10, 0}, {10, 1}, {10, 2}});
  EXPECT_EQ(indices(plan_buckets(items, 1000)),
            (std::vector<std::vector<size_t>>{{0, 2}, {1, 3}, {4}}));
}

TEST(FusionPlanner, ZeroByteItemsAreBucketed) {
  auto items = items_of({{0, 0}, {0, 0}, {8, 0}});
  auto buckets = plan_buckets(items, 8);
  check_invariants(items, 8, buckets);
  EXPECT_EQ(buckets.size(), 1u);
}

// Identical input gives identical output (every rank cuts the same buckets), and
// the invariants hold, over many random lists.
TEST(FusionPlanner, RandomListsAreDeterministicAndValid) {
  std::mt19937_64 rng(42);
  for (int trial = 0; trial < 500; ++trial) {
    std::vector<PlanItem> items(rng() % 200);
    for (auto& it : items) it = PlanItem{static_cast<size_t>(rng() % 5000), static_cast<int>(rng() % 3)};
    size_t threshold = (trial % 5 == 0) ? 0 : rng() % 20000;
    auto a = plan_buckets(items, threshold);
    auto b = plan_buckets(items, threshold);
    ASSERT_EQ(indices(a), indices(b));
    check_invariants(items, threshold, a);
  }
}

}  // namespace
}  // namespace kolo::core
