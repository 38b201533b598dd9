// DeterministicAllreduce: an allreduce over the PointToPoint verbs whose every
// element is op(x_0, x_1, ..., x_{n-1}) folded in rank order 0, 1, ..., n-1 —
// float16 and bfloat16 accumulated in float and rounded once — so the same
// inputs give the same bits whatever the segment size, the count, or which rank
// reduces which element (issue 34's deterministic reductions). The algorithm is
// explained at the top of deterministic_allreduce.cc.
//
// Contract: as RingAllreduce (ring_allreduce.h): the coordinator thread, the
// same calls in the same order on every rank, any count and world size, op in
// {SUM, MIN, MAX, PRODUCT}, input == output allowed; bad arguments fail before
// anything is sent. Scratch (two segments per rank of the world) is allocated on
// first use and kept.
#pragma once

#include <cstdint>
#include <vector>

#include "algorithms/p2p_collectives.h"
#include "algorithms/ring_allreduce.h"
#include "common/status.h"
#include "transport/point_to_point.h"

namespace kolo::algorithms {

class DeterministicAllreduce {
 public:
  explicit DeterministicAllreduce(transport::PointToPoint& p2p, RingOptions options = {});

  Status run(const void* input, void* output, int64_t count, DataType dtype, ReduceOp op);

  // Segments of this many bytes from the next run() on: the result's bits do
  // not change with it, only the time.
  void set_segment_bytes(size_t bytes) {
    options_.segment_bytes = bytes;
    allgather_.set_segment_bytes(bytes);
  }

 private:
  Status reduce_scatter(const char* input, char* output, DataType dtype, ReduceOp op);

  transport::PointToPoint& p2p_;
  RingOptions options_;
  P2PCollectives allgather_;
  std::vector<char> slots_;  // two rounds of the peers' copies of this rank's chunk
  std::vector<int64_t> counts_, displs_;  // the chunks
  std::vector<const void*> inputs_;       // a fold's inputs, in rank order
};

}  // namespace kolo::algorithms
