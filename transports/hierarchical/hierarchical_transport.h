// The "hierarchical" transport: allreduce over several nodes as an intra-node
// reduce-scatter, an inter-node ring allreduce on each rank's shard, and an
// intra-node allgather; the other collectives as compositions of the same kind
// (hierarchical_collectives.h).
//
// Contract (see transport/transport.h): called by the coordinator thread only, for
// buckets in the same order on every rank; CPU memory; every dtype; ops SUM, MIN,
// MAX, PRODUCT. The registry composes it (build_transports) where there are
// several nodes and every node has the same number of ranks (then the ranks with
// equal local rank, the cross group, hold equal shards), from two engines it
// receives and does not build: the node layer's (the world factory's node(),
// transports/shm) and a cross-node engine (transport/cross_engine.h: kolo's over
// the world's verbs, or the world's own). It knows no world: any world with a
// node layer and a cross engine has it. create() is collective over the world.
//
// How: the node layer's shm engine (transports/shm/allreduce.h) runs the bucket
// slice by slice; after a rank has reduced its shard of a slice over its node,
// and before the node's other ranks copy that shard, the shard goes through the
// cross engine's allreduce (ShmAllreduce::ShardStage). Inside a node the data
// moves through shared memory; across nodes each rank moves 2(c-1)/c of its 1/l
// shard, so every rank of a node drives the network with a distinct part of the
// bucket.
//
// Tested across real nodes: the hosts of a pretend cluster (tools/pretend_cluster.sh,
// tests/multihost), in the MPI world and the socket world. KOLO_TEST_NODE_SIZE,
// which splits one machine's ranks into pretend nodes of consecutive ranks, is
// left only where that cluster cannot go: the GPU tests (tests/gpu, run by the
// GPU kit with a plain mpiexec), the test of the knob's own agreement at init,
// and mpi_world_test's check of the option.
#pragma once

#include <memory>

#include "transport/control_plane.h"
#include "transport/cross_engine.h"
#include "transport/transport.h"
#include "transports/hierarchical/hierarchical_collectives.h"
#include "transports/shm/transport.h"

namespace kolo::hierarchical {

class HierarchicalTransport : public transport::Transport {
 public:
  // Slots of the intra-node stage: larger than shm's, so that each inter-node
  // ring call moves a shard worth its 2(c-1) message latencies. A world makes its
  // node layer with them where it has several nodes.
  static constexpr size_t kSlotBytes = size_t{2} << 20;

  // Collective over the world (the collectives' agreement at create()). `node` is
  // the node layer's engines, the allreduce's made with slots of kSlotBytes;
  // `cross` the cross-node engine. `control` is the world's.
  static Status create(transport::ControlPlane& control, std::unique_ptr<shm::ShmTransport> node,
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
  // The ring segment reaches the cross-node engine; the node stage keeps kSlotBytes
  // (its slice is sized for the network, not for the caches shm's is tuned to).
  void tune(const transport::Tuning& tuning) override { cross_->tune(tuning); }

  // The other collectives: HierarchicalCollectives (hierarchical_collectives.h).
  Status supports_collective(Collective op,
                             const transport::CollectiveView& view) const override {
    return collectives_->supports(op, view);
  }
  std::unique_ptr<transport::Work> collective(Collective op,
                                              const transport::CollectiveView& view) override {
    return std::make_unique<transport::CompletedWork>(collectives_->run(op, view));
  }

 private:
  HierarchicalTransport() = default;

  std::unique_ptr<shm::ShmTransport> node_;  // its engines: the intra-node steps
  std::shared_ptr<transport::CrossEngine> cross_;
  std::unique_ptr<HierarchicalCollectives> collectives_;
};

}  // namespace kolo::hierarchical
