// kolo's ring allreduce over the PointToPoint verbs, and the "ring" transport.
// The algorithm is explained at the top of ring_allreduce.cc; its index math lives
// in ring_schedule.h.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "common/status.h"
#include "transport/point_to_point.h"
#include "transport/transport.h"

namespace kolo::algorithms {

struct RingOptions {
  // Bytes per pipelined segment: a chunk is moved in segments so that reducing
  // segment k overlaps receiving segment k+1.
  size_t segment_bytes = 256 << 10;
};

class RingAllreduce {
 public:
  RingAllreduce(transport::PointToPoint& p2p, RingOptions options = {});

  // Allreduce of `count` elements from `input` into `output` (may be equal) with
  // op in {SUM, MIN, MAX, PRODUCT}. Correct for any count (including 0 and counts
  // smaller than or not divisible by the world size) and any world size. Scratch
  // memory is allocated on first use and kept.
  Status run(const void* input, void* output, int64_t count, DataType dtype, ReduceOp op);

 private:
  transport::PointToPoint& p2p_;
  RingOptions options_;
  std::vector<char> scratch_;
};

// The "ring" transport: RingAllreduce behind the Transport seam (CPU memory).
std::unique_ptr<transport::Transport> make_ring_transport(transport::PointToPoint& p2p,
                                                          RingOptions options = {});

}  // namespace kolo::algorithms
