// kolo's allgather(v), broadcast, alltoall(v) and reducescatter over the
// PointToPoint verbs, so that any world with point-to-point verbs has every
// collective (the "ring" transport offers them) and a cross-node step can run on
// any world's verbs (P2PCross, p2p_cross.h).
//
//   allgatherv     a pipelined ring (p2p_ring.cc): n-1 steps, each rank sends
//                  and receives (n-1)/n of the output.
//   reducescatter  the same ring with a reduction at each hop and per-rank
//                  counts (p2p_ring.cc): n-1 steps, (n-1)/n of the input.
//   broadcast      a binomial tree for small messages, a pipelined chain of
//                  segments for large ones (p2p_broadcast.cc).
//   alltoallv      pairwise exchange (p2p_alltoall.cc): n-1 steps, at step k
//                  rank r sends to r+k and receives from r-k.
// Each file's top comment explains its algorithm, its picture and its cost; the
// index math is in p2p_schedule.h.
//
// Contract (as every transport call, transport.h):
// - Called by one thread (the coordinator), in the same order and with the same
//   counts, dtype, root and op on every rank of the verbs; runs to completion.
// - The caller owns the buffers; nothing is kept after a call returns.
// - Arguments are checked before anything is sent: a bad one (counts not one per
//   rank, a negative count, a bad root, dtype or op, a null buffer) is an
//   InvalidArgument naming it, on every rank that gets it, and nothing is left
//   waiting on this rank. Ranks whose calls disagree are a bug of the caller (the
//   executor hands every rank the negotiated counts): a receive then gets another
//   byte count than posted and fails (the verbs report it), or waits.
// - A verb's error fails the call; the requests already posted are waited on
//   before it returns.
// - Correct for every count (0 included, fewer than or not divisible by the
//   ranks) and every world size; reducescatter for SUM, MIN, MAX, PRODUCT.
// - Large blocks travel in segments of `segment_bytes` (RingOptions; the ring's
//   tuning reaches them through set_segment_bytes). Scratch (a few segments for
//   reducescatter, a copy of an input that overlaps its output) is allocated on
//   first use, grows to the largest call and is kept.
#pragma once

#include <cstdint>
#include <vector>

#include "algorithms/p2p_schedule.h"
#include "algorithms/ring_allreduce.h"
#include "common/status.h"
#include "transport/point_to_point.h"
#include "transport/transport.h"

namespace kolo::algorithms {

class P2PCollectives {
 public:
  explicit P2PCollectives(transport::PointToPoint& p2p, RingOptions options = {});

  // The forms with explicit layouts (the cross-node engine's): counts[r] and
  // displs[r] are rank r's block, in elements of dtype (kUint8 for bytes).
  //
  // Rank r's block lands at output + displs[r] on every rank; this rank's comes
  // from `input`, which may already be its place in output (in place).
  Status allgatherv(const void* input, void* output, const std::vector<int64_t>& counts,
                    const std::vector<int64_t>& displs, DataType dtype);
  // `count` elements of root's `data` land in every rank's `data`.
  Status broadcast(void* data, int64_t count, DataType dtype, int root);
  // send_counts[d] elements from input + send_displs[d] go to rank d; from rank s
  // recv_counts[s] elements land at output + recv_displs[s]. Input and output may
  // overlap (the input is then copied first).
  Status alltoallv(const void* input, const std::vector<int64_t>& send_counts,
                   const std::vector<int64_t>& send_displs, void* output,
                   const std::vector<int64_t>& recv_counts,
                   const std::vector<int64_t>& recv_displs, DataType dtype);
  // input: sum(counts) elements, rank r's block at the sum of the counts before
  // it; the op over every rank's input of this rank's block lands in `output`
  // (counts[rank] elements; output == input, or any overlap, is allowed: the
  // input is then copied first). op in {SUM, MIN, MAX, PRODUCT}, no factors.
  Status reducescatter(const void* input, void* output, const std::vector<int64_t>& counts,
                       DataType dtype, ReduceOp op);

  // The CollectiveView forms (blocks back to back in rank order), as the "ring"
  // transport takes them. check() is supports_collective's answer (CPU memory,
  // a valid dtype, counts one per rank and >= 0, a root in range, an
  // element-wise op), the same on every rank for the same view. run() applies
  // the reducescatter's op only: the transport wraps it in scaled_reducescatter.
  static Status check(transport::CollectiveOp op, const transport::CollectiveView& view, int size);
  Status run(transport::CollectiveOp op, const transport::CollectiveView& view);

  // From the next call on; every rank sets the same before the same call.
  void set_segment_bytes(size_t bytes) { options_.segment_bytes = bytes; }

  // Which broadcast runs: by size (p2p_broadcast.cc, Note [Tree or chain]), or
  // one of the two whatever the size (benchmarks, tests). Every rank sets the same.
  enum class Broadcast { kBySize, kTree, kChain };
  void set_broadcast(Broadcast b) { broadcast_ = b; }

 private:
  // p2p_ring.cc: one pass of blocks around the ring; `input` is read as the
  // layout (counts, displs). Allgather (reduce false): blocks land in `output` at
  // displs. Reducescatter: this rank's block lands at `output`.
  Status ring_pass(bool reduce, const char* input, char* output, const std::vector<int64_t>& counts,
                   const std::vector<int64_t>& displs, DataType dtype, ReduceOp op);
  void plan_ring(const RingPass& pass, const std::vector<int64_t>& counts,
                 const std::vector<int64_t>& displs, int64_t seg);
  Status broadcast_tree(char* data, size_t bytes, int root);
  Status broadcast_chain(char* data, size_t bytes, int root);
  int64_t segment_elems(size_t elem) const;
  // `input` itself, or a copy of its first `bytes` in input_copy_ if it overlaps
  // [output, output + out_bytes).
  const char* unaliased(const void* input, size_t bytes, const void* output, size_t out_bytes);

  // One event of a ring pass, in the order this rank meets them (p2p_ring.cc).
  struct RingEvent {
    bool first_send;  // a step-0 send of this rank's own data; else a receive
    int step;
    int block;
    int64_t begin;  // elements, into the layout
    int64_t count;
  };

  transport::PointToPoint& p2p_;
  RingOptions options_;
  Broadcast broadcast_ = Broadcast::kBySize;
  std::vector<char> slots_;       // reducescatter's segments in flight
  std::vector<char> input_copy_;  // an input that overlaps its output
  std::vector<RingEvent> events_;  // a ring pass's events
  std::vector<size_t> receives_;   // which of them are receives, in order
  std::vector<int64_t> displs_;    // reducescatter's layout
  std::vector<int64_t> view_displs_, view_rdispls_;  // the view forms' layouts
};

}  // namespace kolo::algorithms
