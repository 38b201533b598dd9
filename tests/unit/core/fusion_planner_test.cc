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
// The same plan, bucket by bucket, bytes included.
void expect_same_plan(const std::vector<PlannedBucket>& a, const std::vector<PlannedBucket>& b) {
  ASSERT_EQ(indices(a), indices(b));
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].bytes, b[i].bytes) << "bucket " << i;
}

// Each trial is also planned into one scratch and one output kept across the
// trials (as the executor keeps them): what earlier, larger or smaller plans
// left there must not show.
TEST(FusionPlanner, RandomListsAreDeterministicAndValid) {
  std::mt19937_64 rng(42);
  PlanScratch scratch;
  std::vector<PlannedBucket> kept;
  for (int trial = 0; trial < 500; ++trial) {
    std::vector<PlanItem> items(rng() % 200);
    for (auto& it : items) it = PlanItem{static_cast<size_t>(rng() % 5000), static_cast<int>(rng() % 3)};
    size_t threshold = (trial % 5 == 0) ? 0 : rng() % 20000;
    auto a = plan_buckets(items, threshold);
    auto b = plan_buckets(items, threshold);
    ASSERT_EQ(indices(a), indices(b));
    check_invariants(items, threshold, a);
    plan_buckets(items, threshold, &scratch, &kept);
    expect_same_plan(a, kept);
  }
}

// plan_cycle(): the planner over negotiated responses.

Response response(Collective c, DataType dtype, int64_t count, DeviceKind device = DeviceKind::kCpu) {
  Response r;
  r.params.collective = c;
  r.params.dtype = dtype;
  r.params.count = count;
  r.params.device_kind = device;
  return r;
}

Response allgather(DataType dtype, std::vector<int64_t> rows, int64_t row_count, int rank = 0) {
  Response r = response(Collective::kAllgather, dtype, rows[rank] * row_count);
  r.params.row_count = row_count;
  r.rows_per_rank = std::move(rows);
  return r;
}

Response broadcast(DataType dtype, int64_t count, int root) {
  Response r = response(Collective::kBroadcast, dtype, count);
  r.params.root = root;
  return r;
}

std::vector<const Response*> pointers(const std::vector<Response>& list) {
  std::vector<const Response*> out;
  for (const Response& r : list) out.push_back(&r);
  return out;
}

bool fusable_kind(const TensorParams& p) {
  return p.collective == Collective::kAllreduce ||
         ((p.collective == Collective::kAllgather || p.collective == Collective::kBroadcast) &&
          p.device_kind == DeviceKind::kCpu);
}

// The invariants stated in fusion_planner.h for plan_cycle(), checked field by
// field (not through same_fusion_class, which they are to catch).
void check_cycle_invariants(const std::vector<Response>& list, int world, size_t threshold,
                            size_t alone, const std::vector<PlannedBucket>& buckets) {
  std::vector<size_t> packed;
  for (const Response& r : list) packed.push_back(packed_bytes(r, world));
  std::vector<int> seen(list.size(), 0);
  size_t last_first = 0;
  for (size_t b = 0; b < buckets.size(); ++b) {
    const PlannedBucket& bucket = buckets[b];
    ASSERT_FALSE(bucket.items.empty());
    if (b > 0) EXPECT_GT(bucket.items[0], last_first);
    last_first = bucket.items[0];
    size_t bytes = 0;
    const TensorParams& first = list[bucket.items[0]].params;
    for (size_t k = 0; k < bucket.items.size(); ++k) {
      const size_t i = bucket.items[k];
      ++seen[i];
      bytes += packed[i];
      if (k > 0) EXPECT_GT(i, bucket.items[k - 1]);
      const TensorParams& p = list[i].params;
      EXPECT_EQ(p.collective, first.collective) << "bucket " << b << " mixes kinds";
      EXPECT_EQ(p.dtype, first.dtype) << "bucket " << b << " mixes dtypes";
      EXPECT_EQ(p.device_kind, first.device_kind) << "bucket " << b << " mixes devices";
      if (p.collective == Collective::kBroadcast) {
        EXPECT_EQ(p.root, first.root) << "bucket " << b << " mixes roots";
      }
      if (p.collective == Collective::kAllreduce) {
        EXPECT_EQ(p.op, first.op);
        EXPECT_EQ(p.prescale, first.prescale);
        EXPECT_EQ(p.postscale, first.postscale);
      }
    }
    EXPECT_EQ(bytes, bucket.bytes);
    if (bucket.items.size() > 1) {
      EXPECT_LE(bytes, threshold) << "bucket " << b << " exceeds the threshold";
      for (size_t i : bucket.items) {
        EXPECT_TRUE(fusable_kind(list[i].params)) << "item " << i << " must run alone";
        EXPECT_LT(packed[i], alone) << "item " << i << " is past the large-tensor cut-off";
      }
    }
  }
  for (int s : seen) EXPECT_EQ(s, 1);
}

TEST(FusionCycle, AllgathersOfOneDtypeFuseBoundedByTheirGatheredBytes) {
  // Gathered bytes: 4 * (1 + 0 + 2) * 2 = 24 and 4 * (3 + 3 + 3) = 36 and 24 again.
  std::vector<Response> list = {allgather(DataType::kFloat32, {1, 0, 2}, 2),
                                allgather(DataType::kFloat32, {3, 3, 3}, 1),
                                allgather(DataType::kFloat32, {1, 0, 2}, 2)};
  EXPECT_EQ(packed_bytes(list[0], 3), 24u);
  EXPECT_EQ(packed_bytes(list[1], 3), 36u);
  auto plan = plan_cycle(pointers(list), 3, 60, 1 << 20);
  EXPECT_EQ(indices(plan), (std::vector<std::vector<size_t>>{{0, 1}, {2}}));
  EXPECT_EQ(plan[0].bytes, 60u);
  plan = plan_cycle(pointers(list), 3, 84, 1 << 20);
  EXPECT_EQ(indices(plan), (std::vector<std::vector<size_t>>{{0, 1, 2}}));
  check_cycle_invariants(list, 3, 84, 1 << 20, plan);
}

TEST(FusionCycle, NeverMixesKindDtypeRootOrDevice) {
  std::vector<Response> list = {
      allgather(DataType::kFloat32, {1, 1}, 1),                               // 0
      broadcast(DataType::kFloat32, 4, 0),                                    // 1
      response(Collective::kAllreduce, DataType::kFloat32, 4),                // 2
      allgather(DataType::kInt32, {1, 1}, 1),                                 // 3
      broadcast(DataType::kFloat32, 4, 1),                                    // 4
      broadcast(DataType::kFloat32, 4, 0),                                    // 5
      allgather(DataType::kFloat32, {2, 1}, 1),                               // 6
      response(Collective::kBroadcast, DataType::kFloat32, 4, DeviceKind::kCuda),  // 7 (root -1)
      response(Collective::kAllreduce, DataType::kFloat32, 4),                // 8
      allgather(DataType::kInt32, {0, 0}, 1),                                 // 9
  };
  list[7].params.root = 0;
  auto plan = plan_cycle(pointers(list), 2, 1 << 20, 1 << 20);
  EXPECT_EQ(indices(plan), (std::vector<std::vector<size_t>>{
                               {0, 6}, {1, 5}, {2, 8}, {3, 9}, {4}, {7}}));
  check_cycle_invariants(list, 2, 1 << 20, 1 << 20, plan);
}

TEST(FusionCycle, LargeTensorsGroupsAndOtherKindsRunAlone) {
  Response group = response(Collective::kGroupedAllgather, DataType::kFloat32, 2);
  group.params.member_row_counts = {1, 1};
  group.rows_per_rank = {1, 1, 1, 1};  // member-major
  Response grouped_allreduce = response(Collective::kGroupedAllreduce, DataType::kFloat32, 4);
  std::vector<Response> list = {
      allgather(DataType::kFloat32, {1, 1}, 1),                   // 0: 8 bytes
      allgather(DataType::kFloat32, {100, 100}, 1),               // 1: 800 bytes, past the cut-off
      group,                                                      // 2
      response(Collective::kAlltoall, DataType::kFloat32, 2),     // 3
      response(Collective::kReducescatter, DataType::kFloat32, 2),// 4
      grouped_allreduce,                                          // 5
      response(Collective::kAllgather, DataType::kFloat32, 1, DeviceKind::kCuda),  // 6
      allgather(DataType::kFloat32, {1, 1}, 1),                   // 7
      broadcast(DataType::kFloat32, 300, 0),                      // 8: 1200 bytes > threshold
      broadcast(DataType::kFloat32, 1, 0),                        // 9
  };
  list[6].rows_per_rank = {1, 1};
  EXPECT_EQ(packed_bytes(list[2], 2), 16u);
  auto plan = plan_cycle(pointers(list), 2, 1000, 512);
  EXPECT_EQ(indices(plan), (std::vector<std::vector<size_t>>{
                               {0, 7}, {1}, {2}, {3}, {4}, {5}, {6}, {8}, {9}}));
  check_cycle_invariants(list, 2, 1000, 512, plan);
  // Threshold 0: nothing fuses.
  plan = plan_cycle(pointers(list), 2, 0, 512);
  EXPECT_EQ(plan.size(), list.size());
}

// Random cycles: deterministic, and every invariant holds.
TEST(FusionCycle, RandomCyclesAreDeterministicAndValid) {
  std::mt19937_64 rng(7);
  const Collective kinds[] = {Collective::kAllreduce,     Collective::kAllgather,
                              Collective::kBroadcast,     Collective::kAlltoall,
                              Collective::kReducescatter, Collective::kGroupedAllreduce,
                              Collective::kGroupedAllgather, Collective::kBarrier};
  const DataType dtypes[] = {DataType::kFloat32, DataType::kInt8, DataType::kFloat64};
  size_t fused = 0;  // buckets of several responses: the test must see some
  PlanScratch scratch;  // kept across trials, as the executor keeps them
  std::vector<PlannedBucket> kept;
  for (int trial = 0; trial < 300; ++trial) {
    const int world = 1 + static_cast<int>(rng() % 4);
    std::vector<Response> list(rng() % 60);
    for (Response& r : list) {
      TensorParams& p = r.params;
      p.collective = kinds[rng() % 8];
      p.dtype = dtypes[rng() % 3];
      p.device_kind = rng() % 5 == 0 ? DeviceKind::kCuda : DeviceKind::kCpu;
      p.op = rng() % 2 ? ReduceOp::kSum : ReduceOp::kMax;
      p.postscale = rng() % 4 == 0 ? 0.5 : 1.0;
      p.root = static_cast<int32_t>(rng() % world);
      p.row_count = 1 + static_cast<int64_t>(rng() % 3);
      const int members = p.collective == Collective::kGroupedAllgather ? 2 : 1;
      for (int m = 0; m < members; ++m) p.member_row_counts.push_back(p.row_count);
      for (int k = 0; k < world * members; ++k) r.rows_per_rank.push_back(rng() % 40);
      p.count = static_cast<int64_t>(rng() % 200);
    }
    const size_t threshold = trial % 7 == 0 ? 0 : rng() % 3000;
    const size_t alone = 1 + rng() % 2000;
    auto a = plan_cycle(pointers(list), world, threshold, alone);
    auto b = plan_cycle(pointers(list), world, threshold, alone);
    ASSERT_EQ(indices(a), indices(b));
    check_cycle_invariants(list, world, threshold, alone, a);
    plan_cycle(pointers(list), world, threshold, alone, &scratch, &kept);
    expect_same_plan(a, kept);
    for (const PlannedBucket& bucket : a) fused += bucket.items.size() > 1;
  }
  EXPECT_GT(fused, 300u);
}

}  // namespace
}  // namespace kolo::core
