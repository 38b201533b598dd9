#include "algorithms/ring_schedule.h"

#include <algorithm>

#include "common/check.h"

namespace kolo::algorithms {

RingSchedule::RingSchedule(int rank, int size, int64_t count)
    : rank_(rank), size_(size), count_(count) {
  KOLO_CHECK_GE(size, 1);
  KOLO_CHECK_GE(rank, 0);
  KOLO_CHECK_LT(rank, size);
  KOLO_CHECK_GE(count, int64_t{0});
}

Range RingSchedule::chunk(int c) const {
  KOLO_CHECK_GE(c, 0);
  KOLO_CHECK_LT(c, size_);
  const int64_t base = count_ / size_;
  const int64_t extra = count_ % size_;  // the first `extra` chunks get one more
  Range r;
  r.begin = c * base + std::min<int64_t>(c, extra);
  r.count = base + (c < extra ? 1 : 0);
  return r;
}

int64_t RingSchedule::max_chunk_count() const { return chunk(0).count; }

int64_t RingSchedule::num_segments(int64_t chunk_count, int64_t segment_elems) {
  KOLO_CHECK_GE(segment_elems, int64_t{1});
  KOLO_CHECK_GE(chunk_count, int64_t{0});
  // Not (chunk_count + segment_elems - 1) / segment_elems: that overflows for
  // segment_elems near INT64_MAX (found by tests/fuzz/schedule_fuzz.cc).
  return chunk_count / segment_elems + (chunk_count % segment_elems != 0 ? 1 : 0);
}

Range RingSchedule::segment(const Range& chunk, int64_t segment_elems, int64_t k) {
  KOLO_CHECK_GE(k, int64_t{0});
  KOLO_CHECK_LT(k, num_segments(chunk.count, segment_elems));
  Range r;
  r.begin = chunk.begin + k * segment_elems;
  r.count = std::min(segment_elems, chunk.end() - r.begin);
  return r;
}

}  // namespace kolo::algorithms
