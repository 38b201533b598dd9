// The "hierarchical" transport: allreduce over several nodes as an intra-node
// reduce-scatter, an inter-node ring allreduce on each rank's shard, and an
// intra-node allgather; the other collectives as compositions of the same kind
// (hierarchical_collectives.h).
//
// Contract (see transport/transport.h): called by the coordinator thread only, for
// buckets in the same order on every rank; CPU memory; every dtype; ops SUM, MIN,
// MAX, PRODUCT. The MPI world offers it when there are several nodes and every
// node has the same number of ranks (then the ranks with equal local rank, the
// cross communicator, hold equal shards). create() is collective over the world.
//
// How: the node layer's shm engine (transports/shm/allreduce.h) runs the bucket
// slice by slice; after a
// rank has reduced its shard of a slice over its node, and before the node's
// other ranks copy that shard, the shard goes through kolo's ring allreduce over
// the cross communicator (ShmAllreduce::ShardStage). Inside a node the data moves
// through shared memory; across nodes each rank moves 2(c-1)/c of its 1/l shard,
// so every rank of a node drives the network with a distinct part of the bucket.
//
// Tested across real nodes: the hosts of a pretend cluster (tools/pretend_cluster.sh,
// tests/multihost). KOLO_TEST_NODE_SIZE (mpi::WorldOptions::test_node_size), which
// splits one machine's ranks into pretend nodes of consecutive ranks, is left only
// where that cluster cannot go: the GPU tests (tests/gpu, run by the GPU kit with
// a plain mpiexec), the test of the knob's own agreement at init, and
// mpi_world_test's check of the option.
#pragma once

#include <memory>

#include "algorithms/ring_allreduce.h"
#include "transport/control_plane.h"
#include "transport/factory.h"
#include "transport/transport.h"
#include "transports/mpi/hierarchical_collectives.h"
#include "transports/mpi/mpi_comm.h"
#include "transports/mpi/mpi_point_to_point.h"
#include "transports/shm/allreduce.h"
#include "transports/shm/collectives.h"

namespace kolo::mpi {

class CrossRing;

class HierarchicalTransport : public transport::Transport {
 public:
  // Slots of the intra-node stage: larger than shm's, so that each inter-node
  // ring call moves a shard worth its 2(c-1) message latencies.
  static constexpr size_t kSlotBytes = size_t{2} << 20;

  // Collective over the world (the collectives' agreement at create()). `node`
  // and `node_collectives` are the node layer's engines, the allreduce's made
  // with slots of kSlotBytes; `cross` is the cross-node engine the registry
  // composes in (build_transports).
  static Status create(const SharedComms& comms, std::unique_ptr<shm::ShmAllreduce> node,
                       std::unique_ptr<shm::ShmCollectives> node_collectives,
                       std::shared_ptr<transport::CrossEngine> cross,
                       std::unique_ptr<HierarchicalTransport>* out);

  const char* name() const override { return "hierarchical"; }
  transport::Capabilities capabilities() const override {
    transport::Capabilities c;
    c.collectives = transport::kAllCollectives;
    c.host = true;
    c.reach = transport::Reach::kEqualNodes;
    c.chunk = transport::Chunk::kMessageSegment;
    return c;
  }
  Status supports(const transport::Bucket& bucket) const override;
  std::unique_ptr<transport::Work> allreduce(const transport::Bucket& bucket) override;
  // The ring segment reaches the cross-node ring; the node stage keeps kSlotBytes
  // (its slice is sized for the network, not for the caches shm's is tuned to).
  void tune(const transport::Tuning& tuning) override { cross_->tune(tuning); }

  // The other collectives: HierarchicalCollectives (hierarchical_collectives.h).
  Status supports_collective(transport::CollectiveOp op,
                             const transport::CollectiveView& view) const override {
    return collectives_->supports(op, view);
  }
  std::unique_ptr<transport::Work> collective(transport::CollectiveOp op,
                                              const transport::CollectiveView& view) override {
    return std::make_unique<transport::CompletedWork>(collectives_->run(op, view));
  }

 private:
  HierarchicalTransport() = default;

  std::unique_ptr<shm::ShmAllreduce> node_;
  std::shared_ptr<transport::CrossEngine> cross_;
  std::unique_ptr<HierarchicalCollectives> collectives_;
};

// The MPI world's cross-node engine: kolo's ring allreduce over a duplicate of the
// cross communicator (the ranks with this rank's local rank, one per node), in
// place on host memory. create() is collective over comms->cross. The
// hierarchical paths, host and device, run their inter-node step on it.
class CrossRing : public transport::CrossEngine {
 public:
  static Status create(const SharedComms& comms, std::unique_ptr<CrossRing>* out);
  Status allreduce(void* data, int64_t count, DataType dtype, ReduceOp op) override {
    return ring_->run(data, data, count, dtype, op);
  }
  void tune(const transport::Tuning& tuning) override {
    if (tuning.segment_bytes > 0) ring_->set_segment_bytes(tuning.segment_bytes);
  }

 private:
  CrossRing() = default;
  SharedComms comms_;  // data: the cross communicator's duplicate
  std::unique_ptr<MpiPointToPoint> p2p_;
  std::unique_ptr<algorithms::RingAllreduce> ring_;
};

}  // namespace kolo::mpi
