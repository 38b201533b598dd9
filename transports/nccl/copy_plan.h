// The launch plan of the batched copy kernel (device_kernels.cu): how a list of
// copies (pack tensors into the fusion buffer, unpack them out of it) is cut into
// kernel launches, blocks and tiles. Pure C++, no CUDA header, so that every
// invariant can be tested on a machine without a GPU.
//
// The split. Every segment is cut into tiles of kTileBytes (the last tile of a
// segment may be short); a tile is the unit of work of one thread block:
//
//   segments   |--- s0: 3 tiles ---|- s1: 1 -|------ s2: 4 tiles ------|
//   tiles      | t0  | t1  | t2   | t3       | t4  | t5  | t6  | t7     |
//   tile_start   0                  3          4                          8
//
// One launch covers up to kMaxSegmentsPerLaunch non-empty segments. Its by-value
// parameter struct carries, for each of them, src, dst, count and tile_start (the
// prefix sum of tile counts), so nothing is allocated or copied to the device per
// call. The grid has min(tiles, kMaxBlocksPerLaunch) blocks of kThreadsPerBlock
// threads; block b takes tiles b, b + gridDim.x, ... (a grid-stride loop over
// tiles). For each tile it finds the segment by binary search over tile_start
// (segment_of_tile, shared with the tests), and its threads copy the tile's
// elements with 16-byte loads and stores where both pointers are 16-byte aligned
// (kTileBytes is a multiple of 16, so every tile starts as aligned as its
// segment), one element at a time for the rest.
//
// Why tiles of fixed bytes: every block gets the same work whatever the mix of
// tensor sizes (one 100 MiB tensor or a thousand 1 KiB ones), empty segments take
// no tile and no slot, and a block never walks a segment it has no work in. The
// cost is one binary search (at most log2(kMaxSegmentsPerLaunch) + 1 steps) per
// 8 KiB tile.
//
// Invariants (copy_plan_test.cc checks them):
// - zero launches when every segment is empty (or there are none);
// - launches are in list order, their ranges are disjoint, each range starts and
//   ends at a non-empty segment and holds at most kMaxSegmentsPerLaunch non-empty
//   segments, and every non-empty segment lies in exactly one range;
// - the tiles of a launch cover each element of its segments exactly once;
// - the plan depends only on (counts, elem_size): the same on every rank.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

// Functions the kernel and the host tests both call.
#if defined(__CUDACC__)
#define KOLO_NCCL_HOST_DEVICE __host__ __device__
#else
#define KOLO_NCCL_HOST_DEVICE
#endif

namespace kolo::nccl {

struct CopySegment {
  const void* src;  // nullptr: write zeros
  void* dst;
  int64_t count;  // elements
};

// One launch of the batched copy kernel covers segments [first, first + count) of
// the list (empty segments inside the range are skipped when the table is packed).
struct CopyLaunch {
  int first = 0;
  int count = 0;
  int blocks = 0;
  int threads = 0;
};

// Bounded by the kernel's by-value parameter struct: 32 bytes per segment
// (src, dst, count, tile_start) plus a few scalars, which must stay under 4 KiB
// (static_assert in device_kernels.cu).
constexpr int kMaxSegmentsPerLaunch = 96;
constexpr int64_t kTileBytes = 8192;
constexpr int kThreadsPerBlock = 256;
// Enough blocks to fill a large GPU (8 resident blocks of 256 threads on each of
// ~128 SMs); the grid-stride loop takes the tiles beyond.
constexpr int kMaxBlocksPerLaunch = 1024;

// Elements per tile for an element of elem_size bytes (1, 2, 4 or 8).
KOLO_NCCL_HOST_DEVICE constexpr int64_t tile_elems(size_t elem_size) {
  return kTileBytes / static_cast<int64_t>(elem_size);
}

// Tiles of a segment of `count` elements: ceil(count / tile_elems).
KOLO_NCCL_HOST_DEVICE constexpr int64_t tiles_of(int64_t count, size_t elem_size) {
  return (count + tile_elems(elem_size) - 1) / tile_elems(elem_size);
}

// The segment (index into a launch's packed table) that holds `tile`, given the
// prefix tile_start[0..segments] (tile_start[0] == 0, strictly increasing since
// packed segments are non-empty) and 0 <= tile < tile_start[segments]: the largest
// s with tile_start[s] <= tile.
KOLO_NCCL_HOST_DEVICE inline int segment_of_tile(const int64_t* tile_start, int segments,
                                                 int64_t tile) {
  int lo = 0;
  int hi = segments - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (tile_start[mid] <= tile) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

// The elements [begin, end) of its segment that tile `tile` of a launch covers.
struct TileRange {
  int segment;  // index into the launch's packed table
  int64_t begin;
  int64_t end;
};

KOLO_NCCL_HOST_DEVICE inline TileRange tile_range(const int64_t* tile_start,
                                                  const int64_t* counts, int segments,
                                                  int64_t tile, int64_t elems_per_tile) {
  const int s = segment_of_tile(tile_start, segments, tile);
  const int64_t begin = (tile - tile_start[s]) * elems_per_tile;
  const int64_t end = begin + elems_per_tile < counts[s] ? begin + elems_per_tile : counts[s];
  return TileRange{s, begin, end};
}

// The table one launch passes to the kernel, as positions in the segment list:
// the launch's non-empty segments in order, and their tile prefix sum.
struct LaunchTable {
  int segments = 0;
  int index[kMaxSegmentsPerLaunch] = {};          // position in the list
  int64_t count[kMaxSegmentsPerLaunch] = {};      // elements
  int64_t tile_start[kMaxSegmentsPerLaunch + 1] = {};  // tile_start[segments] = tiles
};

// Cuts `counts` (elements per segment) into launches; see the invariants above.
// elem_size is 1, 2, 4 or 8.
std::vector<CopyLaunch> plan_batched_copy(const std::vector<int64_t>& counts,
                                          size_t elem_size);

// Packs the table of one launch of plan_batched_copy(counts, elem_size).
LaunchTable pack_launch(const CopyLaunch& launch, const std::vector<int64_t>& counts,
                        size_t elem_size);

}  // namespace kolo::nccl
