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
  // segment k overlaps receiving segment k+1. 256 KiB, measured with
  // kolo-allreduce-perf -t ring -r mpi, 2 ranks, float32 on the 2-core VM (busbw
  // GB/s at 1 MiB / 8 MiB / 64 MiB; load average ~2.6 from other builds):
  //   64 KiB: 5.5 / 3.3 / 3.4    256 KiB: 5.2 / 3.4 / 4.1    1 MiB: 5.4 / 3.2 / 4.1
  // Small buckets are equal within noise (a chunk under a segment is one
  // message either way); at 64 MiB, 64 KiB segments pay 4x the messages and
  // lose ~20%, while 1 MiB segments gain nothing and need 4x the scratch. MPICH's
  // shared-memory eager/rendezvous switch sits far below all three sizes.
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

  // Segments of this many bytes from the next run() on (at least one element);
  // every rank sets the same before the same run(). Scratch grows if it must.
  void set_segment_bytes(size_t bytes) { options_.segment_bytes = bytes; }

 private:
  transport::PointToPoint& p2p_;
  RingOptions options_;
  std::vector<char> scratch_;
};

// The "ring" transport (ring_transport.cc): RingAllreduce for buckets and
// P2PCollectives (p2p_collectives.h) for allgather, broadcast, alltoall and
// reducescatter, over the same verbs, CPU memory only. So every world with
// point-to-point verbs has every collective.
std::unique_ptr<transport::Transport> make_ring_transport(transport::PointToPoint& p2p,
                                                          RingOptions options = {});

}  // namespace kolo::algorithms
