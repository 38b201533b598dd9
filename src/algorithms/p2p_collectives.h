// The collectives other than allreduce over the PointToPoint verbs, for a world
// with no native ones (the socket world). Layouts are transport::CollectiveView's:
// rank r's block of a gathered or scattered buffer starts at the sum of the
// counts before r.
//
//   allgather      a ring: at step s (0..n-2) rank r passes block (r - s) mod n to
//                  its right neighbour and receives block (r - s - 1) mod n from its
//                  left, straight into the output; n-1 steps, (n-1)/n of the output
//                  through each rank. The input may be this rank's own block.
//   broadcast      a binomial tree from the root: ceil(log2 n) rounds, each rank
//                  forwarding the whole buffer once it has it.
//   alltoall       every send and receive posted at once, then waited: the n-1
//                  exchanges run side by side; the own block is copied.
//   reducescatter  a ring over a copy of the input: at step s rank r sends its
//                  partial block (r - s - 1) mod n to the right and reduces block
//                  (r - s - 2) mod n arriving from the left into its copy; after
//                  n-1 steps block r holds every rank's contribution (in ring order,
//                  so a floating-point sum may round differently from another
//                  transport's order). Factors: transport::scaled_reducescatter.
//
// Contract: the coordinator thread calls these in the same order on every rank
// with views that agree (the negotiation guarantees it); host memory only. Every
// request posted is waited on before a call returns, also when it fails.
#pragma once

#include <memory>
#include <vector>

#include "common/status.h"
#include "transport/point_to_point.h"
#include "transport/transport.h"

namespace kolo::algorithms {

class P2pCollectives {
 public:
  explicit P2pCollectives(transport::PointToPoint& p2p) : p2p_(p2p) {}

  // OK for host memory, a valid dtype and (reducescatter) SUM, MIN, MAX or
  // PRODUCT; Unsupported with the reason otherwise.
  static Status supports(transport::CollectiveOp op, const transport::CollectiveView& view);

  Status run(transport::CollectiveOp op, const transport::CollectiveView& view);

 private:
  Status allgather(const transport::CollectiveView& view);
  Status broadcast(const transport::CollectiveView& view);
  Status alltoall(const transport::CollectiveView& view);
  Status reducescatter(const transport::CollectiveView& view);

  transport::PointToPoint& p2p_;
  std::vector<char> work_;     // reducescatter's copy of the input, grow-only
  std::vector<char> arrived_;  // reducescatter's incoming block, grow-only
  std::vector<char> scaled_;   // scaled_reducescatter's prescaled input
};

// "ring" with the collectives: kolo's ring allreduce (ring_allreduce.h) for
// buckets and P2pCollectives for the rest, over the same verbs.
std::unique_ptr<transport::Transport> make_ring_with_collectives(transport::PointToPoint& p2p);

}  // namespace kolo::algorithms
