// The batched copy's launch plan (transports/nccl/copy_plan.h): launches bounded
// and in order, empty segments free, and the tiles a simulated grid visits cover
// every element of every segment exactly once.
#include "transports/nccl/copy_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

namespace kolo::nccl {
namespace {

using Ranges = std::vector<std::pair<int64_t, int64_t>>;  // [begin, end) per tile

// Runs the kernel's work split on the host: every block's grid-stride loop over
// the tiles of every launch, collecting the element ranges each segment receives.
std::vector<Ranges> simulate(const std::vector<int64_t>& counts, size_t elem_size) {
  std::vector<Ranges> covered(counts.size());
  for (const CopyLaunch& launch : plan_batched_copy(counts, elem_size)) {
    const LaunchTable table = pack_launch(launch, counts, elem_size);
    const int64_t tiles = table.tile_start[table.segments];
    for (int block = 0; block < launch.blocks; ++block) {
      for (int64_t tile = block; tile < tiles; tile += launch.blocks) {
        const TileRange r =
            tile_range(table.tile_start, table.count, table.segments, tile, tile_elems(elem_size));
        covered[table.index[r.segment]].emplace_back(r.begin, r.end);
      }
    }
  }
  return covered;
}

// Each segment's ranges, sorted, are non-empty and tile [0, count) without gap
// or overlap.
void expect_exact_cover(const std::vector<int64_t>& counts, size_t elem_size) {
  std::vector<Ranges> covered = simulate(counts, elem_size);
  for (size_t i = 0; i < counts.size(); ++i) {
    Ranges& ranges = covered[i];
    std::sort(ranges.begin(), ranges.end());
    int64_t next = 0;
    for (const auto& [begin, end] : ranges) {
      ASSERT_EQ(begin, next) << "segment " << i << " elem_size " << elem_size;
      ASSERT_LT(begin, end) << "segment " << i;
      ASSERT_LE(end - begin, tile_elems(elem_size));
      next = end;
    }
    EXPECT_EQ(next, counts[i]) << "segment " << i << " elem_size " << elem_size;
  }
}

// Launch ranges in order, disjoint, trimmed to non-empty ends, within bounds, and
// every non-empty segment in exactly one of them.
void expect_valid_launches(const std::vector<int64_t>& counts, size_t elem_size) {
  const std::vector<CopyLaunch> launches = plan_batched_copy(counts, elem_size);
  std::vector<int> seen(counts.size(), 0);
  int previous_end = 0;
  for (const CopyLaunch& launch : launches) {
    ASSERT_GE(launch.first, previous_end);
    ASSERT_GT(launch.count, 0);
    const int end = launch.first + launch.count;
    ASSERT_LE(end, static_cast<int>(counts.size()));
    EXPECT_GT(counts[launch.first], 0);
    EXPECT_GT(counts[end - 1], 0);
    const LaunchTable table = pack_launch(launch, counts, elem_size);
    EXPECT_GE(table.segments, 1);
    EXPECT_LE(table.segments, kMaxSegmentsPerLaunch);
    int64_t tiles = 0;
    for (int i = launch.first; i < end; ++i) {
      ++seen[i];
      tiles += tiles_of(counts[i], elem_size);
    }
    EXPECT_EQ(table.tile_start[table.segments], tiles);
    EXPECT_EQ(launch.blocks, std::min<int64_t>(tiles, kMaxBlocksPerLaunch));
    EXPECT_EQ(launch.threads, kThreadsPerBlock);
    previous_end = end;
  }
  for (size_t i = 0; i < counts.size(); ++i) {
    if (counts[i] > 0) {
      EXPECT_EQ(seen[i], 1) << "segment " << i;
    }
  }
}

TEST(CopyPlanTest, NoSegmentsNoLaunch) {
  EXPECT_TRUE(plan_batched_copy({}, 4).empty());
}

TEST(CopyPlanTest, OnlyEmptySegmentsNoLaunch) {
  EXPECT_TRUE(plan_batched_copy({0, 0, 0}, 2).empty());
}

TEST(CopyPlanTest, EmptySegmentsTakeNoSlotAndNoTile) {
  const std::vector<int64_t> counts = {0, 5, 0, 0, 7, 0};
  const std::vector<CopyLaunch> launches = plan_batched_copy(counts, 4);
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_EQ(launches[0].first, 1);
  EXPECT_EQ(launches[0].count, 4);
  EXPECT_EQ(launches[0].blocks, 2);
  const LaunchTable table = pack_launch(launches[0], counts, 4);
  ASSERT_EQ(table.segments, 2);
  EXPECT_EQ(table.index[0], 1);
  EXPECT_EQ(table.index[1], 4);
  EXPECT_EQ(table.tile_start[2], 2);
  expect_exact_cover(counts, 4);
}

TEST(CopyPlanTest, OneHugeSegment) {
  // 4e9 + 12 bytes of float32: 488282 tiles, the last one 12 + 4e9 % 8192 bytes.
  const int64_t count = 1000000003;
  const std::vector<int64_t> counts = {count};
  const std::vector<CopyLaunch> launches = plan_batched_copy(counts, 4);
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_EQ(launches[0].blocks, kMaxBlocksPerLaunch);
  const LaunchTable table = pack_launch(launches[0], counts, 4);
  EXPECT_EQ(table.tile_start[1], (count * 4 + kTileBytes - 1) / kTileBytes);
  const TileRange last = tile_range(table.tile_start, table.count, 1, table.tile_start[1] - 1,
                                    tile_elems(4));
  EXPECT_EQ(last.end, count);
  EXPECT_EQ(last.end - last.begin, count % tile_elems(4));
  expect_valid_launches(counts, 4);
  expect_exact_cover(counts, 4);
}

TEST(CopyPlanTest, ManyTinySegmentsSplitIntoBoundedLaunches) {
  std::vector<int64_t> counts(1000);
  for (size_t i = 0; i < counts.size(); ++i) counts[i] = 1 + static_cast<int64_t>(i % 3);
  const std::vector<CopyLaunch> launches = plan_batched_copy(counts, 8);
  const size_t expected = (1000 + kMaxSegmentsPerLaunch - 1) / kMaxSegmentsPerLaunch;
  ASSERT_EQ(launches.size(), expected);
  for (size_t l = 0; l + 1 < launches.size(); ++l) {
    EXPECT_EQ(launches[l].first, static_cast<int>(l) * kMaxSegmentsPerLaunch);
    EXPECT_EQ(launches[l].count, kMaxSegmentsPerLaunch);
    EXPECT_EQ(launches[l].blocks, kMaxSegmentsPerLaunch);  // one tile each
  }
  EXPECT_EQ(launches.back().first + launches.back().count, 1000);
  expect_valid_launches(counts, 8);
  expect_exact_cover(counts, 8);
}

TEST(CopyPlanTest, EmptySegmentsBetweenManyDoNotCountTowardsTheBound) {
  // 301 segments, every third one empty (0, 3, ..., 300): 200 non-empty ->
  // launches of 96, 96, 8, the first starting at 1 and the last ending before 300.
  std::vector<int64_t> counts(301);
  for (size_t i = 0; i < counts.size(); ++i) counts[i] = i % 3 == 0 ? 0 : 100;
  const std::vector<CopyLaunch> launches = plan_batched_copy(counts, 2);
  ASSERT_EQ(launches.size(), 3u);
  EXPECT_EQ(pack_launch(launches[0], counts, 2).segments, kMaxSegmentsPerLaunch);
  EXPECT_EQ(pack_launch(launches[1], counts, 2).segments, kMaxSegmentsPerLaunch);
  EXPECT_EQ(pack_launch(launches[2], counts, 2).segments, 200 - 2 * kMaxSegmentsPerLaunch);
  EXPECT_EQ(launches[0].first, 1);
  EXPECT_EQ(launches.back().first + launches.back().count, 300);
  expect_valid_launches(counts, 2);
  expect_exact_cover(counts, 2);
}

TEST(CopyPlanTest, BlocksAreTilesUpToTheCap) {
  EXPECT_EQ(plan_batched_copy({1}, 1)[0].blocks, 1);
  EXPECT_EQ(plan_batched_copy({tile_elems(2)}, 2)[0].blocks, 1);
  EXPECT_EQ(plan_batched_copy({tile_elems(2) + 1}, 2)[0].blocks, 2);
  EXPECT_EQ(plan_batched_copy({tile_elems(8) * kMaxBlocksPerLaunch}, 8)[0].blocks,
            kMaxBlocksPerLaunch);
  EXPECT_EQ(plan_batched_copy({tile_elems(8) * kMaxBlocksPerLaunch + 1}, 8)[0].blocks,
            kMaxBlocksPerLaunch);
}

// Counts around the tile size and around the 16-byte vector width (which the
// kernel's tail loop handles), for every element size.
TEST(CopyPlanTest, TilesCoverEveryElementOnceForAwkwardSizes) {
  for (size_t elem_size : {1, 2, 4, 8}) {
    const int64_t tile = tile_elems(elem_size);
    const int64_t vec = 16 / static_cast<int64_t>(elem_size);
    std::vector<int64_t> counts = {0,        1,        vec - 1,      vec + 1,  3 * vec + 1,
                                   tile - 1, tile,     tile + 1,     0,        2 * tile - vec + 1,
                                   7,        5 * tile + 3, 1,        0,        tile * 3};
    // Deterministic pseudo-random sizes up to four tiles, enough for two launches.
    uint64_t state = 12345 + elem_size;
    for (int i = 0; i < 2 * kMaxSegmentsPerLaunch; ++i) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      counts.push_back(static_cast<int64_t>((state >> 33) % static_cast<uint64_t>(4 * tile)));
    }
    expect_valid_launches(counts, elem_size);
    expect_exact_cover(counts, elem_size);
  }
}

TEST(CopyPlanTest, SameInputSamePlan) {
  const std::vector<int64_t> counts = {3, 0, 100000, 1, 0, 8192, 4095};
  const std::vector<CopyLaunch> a = plan_batched_copy(counts, 2);
  const std::vector<CopyLaunch> b = plan_batched_copy(counts, 2);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].first, b[i].first);
    EXPECT_EQ(a[i].count, b[i].count);
    EXPECT_EQ(a[i].blocks, b[i].blocks);
    EXPECT_EQ(a[i].threads, b[i].threads);
  }
}

TEST(CopyPlanTest, SegmentOfTileIsTheLastStartAtOrBefore) {
  const int64_t tile_start[] = {0, 3, 4, 8};
  const int expected[] = {0, 0, 0, 1, 2, 2, 2, 2};
  for (int64_t tile = 0; tile < 8; ++tile) {
    EXPECT_EQ(segment_of_tile(tile_start, 3, tile), expected[tile]) << "tile " << tile;
  }
  const int64_t one[] = {0, 5};
  EXPECT_EQ(segment_of_tile(one, 1, 4), 0);
}

TEST(CopyPlanTest, TileRangeClipsTheLastTileOfASegment) {
  const int64_t tile_start[] = {0, 2, 3};
  const int64_t counts[] = {1500, 10};
  const int64_t per_tile = 1024;
  const TileRange a = tile_range(tile_start, counts, 2, 1, per_tile);
  EXPECT_EQ(a.segment, 0);
  EXPECT_EQ(a.begin, 1024);
  EXPECT_EQ(a.end, 1500);
  const TileRange b = tile_range(tile_start, counts, 2, 2, per_tile);
  EXPECT_EQ(b.segment, 1);
  EXPECT_EQ(b.begin, 0);
  EXPECT_EQ(b.end, 10);
}

}  // namespace
}  // namespace kolo::nccl
