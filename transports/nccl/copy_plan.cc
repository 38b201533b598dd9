#include "transports/nccl/copy_plan.h"

#include <algorithm>

#include "common/check.h"

namespace kolo::nccl {
namespace {

// Grid of a launch with `tiles` tiles: one block per tile up to the cap.
CopyLaunch make_launch(int first, int end, int64_t tiles) {
  CopyLaunch launch;
  launch.first = first;
  launch.count = end - first;
  launch.blocks = static_cast<int>(std::min<int64_t>(tiles, kMaxBlocksPerLaunch));
  launch.threads = kThreadsPerBlock;
  return launch;
}

void check_elem_size(size_t elem_size) {
  KOLO_CHECK(elem_size == 1 || elem_size == 2 || elem_size == 4 || elem_size == 8);
}

}  // namespace

// Walks the list once, opening a launch at the first non-empty segment after the
// previous launch and closing it after its kMaxSegmentsPerLaunch-th non-empty
// segment or at the last non-empty segment of the list. Empty segments never open
// or close a launch, so they cost neither a slot nor a launch.
std::vector<CopyLaunch> plan_batched_copy(const std::vector<int64_t>& counts,
                                          size_t elem_size) {
  check_elem_size(elem_size);
  std::vector<CopyLaunch> launches;
  const int n = static_cast<int>(counts.size());
  int first = -1;  // first segment of the open launch; -1: none open
  int last = -1;   // last non-empty segment of the open launch
  int used = 0;    // non-empty segments in it
  int64_t tiles = 0;
  for (int i = 0; i < n; ++i) {
    KOLO_CHECK_GE(counts[i], 0);
    if (counts[i] == 0) continue;
    if (first < 0) first = i;
    last = i;
    ++used;
    tiles += tiles_of(counts[i], elem_size);
    if (used == kMaxSegmentsPerLaunch) {
      launches.push_back(make_launch(first, last + 1, tiles));
      first = -1;
      used = 0;
      tiles = 0;
    }
  }
  if (first >= 0) launches.push_back(make_launch(first, last + 1, tiles));
  return launches;
}

LaunchTable pack_launch(const CopyLaunch& launch, const std::vector<int64_t>& counts,
                        size_t elem_size) {
  check_elem_size(elem_size);
  KOLO_CHECK_GE(launch.first, 0);
  KOLO_CHECK_LE(static_cast<size_t>(launch.first) + launch.count, counts.size());
  LaunchTable table;
  for (int i = launch.first; i < launch.first + launch.count; ++i) {
    if (counts[i] == 0) continue;
    KOLO_CHECK_LT(table.segments, kMaxSegmentsPerLaunch);
    const int s = table.segments++;
    table.index[s] = i;
    table.count[s] = counts[i];
    table.tile_start[s + 1] = table.tile_start[s] + tiles_of(counts[i], elem_size);
  }
  return table;
}

}  // namespace kolo::nccl
