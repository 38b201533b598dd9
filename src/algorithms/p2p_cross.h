// P2PCross: the cross-node step of a hierarchical transport over any world's
// point-to-point verbs — an in-place allreduce (the ring) and allgatherv,
// broadcast, alltoallv and reducescatter (P2PCollectives) among the ranks that
// share this rank's local rank, one per node, in node order. What MPI's cross
// communicator gives the MPI world (transports/mpi/mpi_cross.h), for every world
// with verbs; the registry composes it into "hierarchical" (cross_engine.h).
//
// Contract:
// - create() is collective over the world (one allgather of every rank's
//   topology on the control plane); the engine then talks only to its group,
//   through a SubgroupP2P over the world's verbs in tag space `space` (Note [Tag
//   spaces] in tags.h), so it shares the verbs with the world's own transports.
// - Group rank i is the rank of this local rank on node i (cross_rank i), so
//   rank() is this rank's node index and size() the number of nodes that have
//   this local rank (fewer for high local ranks if nodes differ in size).
// - Every method is called by the coordinator thread, in the same order on the
//   group's ranks, and runs to completion; layouts and arguments as in
//   P2PCollectives (p2p_collectives.h), rank indices being group ranks. Errors:
//   as P2PCollectives' and RingAllreduce's. The world's verbs outlive the engine.
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "algorithms/p2p_collectives.h"
#include "algorithms/ring_allreduce.h"
#include "common/status.h"
#include "transport/control_plane.h"
#include "transport/cross_engine.h"
#include "transport/point_to_point.h"

namespace kolo::algorithms {

class P2PCross : public transport::CrossEngine {
 public:
  // The group of ranks with control.topology().local_rank, found through the
  // control plane; InvalidArgument if two of them claim the same node.
  static Status create(transport::ControlPlane& control, transport::PointToPoint& world, int space,
                       RingOptions options, std::unique_ptr<P2PCross>* out);
  // Over a group given as verbs of its own (e.g. a SubgroupP2P).
  P2PCross(std::unique_ptr<transport::PointToPoint> group, RingOptions options = {});

  // Pure: the world ranks whose topology has `all[rank]`'s local rank, ordered by
  // their cross rank. all[r] is rank r's topology.
  static Status cross_members(const std::vector<transport::Topology>& all, int rank,
                              std::vector<int>* members);

  int rank() const override { return group_->rank(); }
  int size() const override { return group_->size(); }

  // CrossEngine: in place, op SUM, MIN, MAX or PRODUCT.
  Status allreduce(void* data, int64_t count, DataType dtype, ReduceOp op) override {
    return ring_.run(data, data, count, dtype, op);
  }
  void tune(const transport::Tuning& tuning) override;

  // The other collectives: P2PCollectives' explicit-layout forms, run to
  // completion before they return.
  std::unique_ptr<transport::Work> allgatherv(const void* input, void* output,
                                              const std::vector<int64_t>& counts,
                                              const std::vector<int64_t>& displs,
                                              DataType dtype) override {
    return done(collectives_.allgatherv(input, output, counts, displs, dtype));
  }
  std::unique_ptr<transport::Work> broadcast(void* data, int64_t count, DataType dtype,
                                             int root) override {
    return done(collectives_.broadcast(data, count, dtype, root));
  }
  std::unique_ptr<transport::Work> alltoallv(const void* input,
                                             const std::vector<int64_t>& send_counts,
                                             const std::vector<int64_t>& send_displs, void* output,
                                             const std::vector<int64_t>& recv_counts,
                                             const std::vector<int64_t>& recv_displs,
                                             DataType dtype) override {
    return done(collectives_.alltoallv(input, send_counts, send_displs, output, recv_counts,
                                       recv_displs, dtype));
  }
  std::unique_ptr<transport::Work> reducescatter(const void* input, void* output,
                                                 const std::vector<int64_t>& counts,
                                                 DataType dtype, ReduceOp op) override {
    return done(collectives_.reducescatter(input, output, counts, dtype, op));
  }

 private:
  static std::unique_ptr<transport::Work> done(Status s) {
    return std::make_unique<transport::CompletedWork>(std::move(s));
  }

  std::unique_ptr<transport::PointToPoint> group_;
  RingAllreduce ring_;
  P2PCollectives collectives_;
};

}  // namespace kolo::algorithms
