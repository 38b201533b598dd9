#include "transports/hierarchical/hierarchical_transport.h"

#include <string>
#include <utility>

#include "common/check.h"
#include "transport/reduction.h"

namespace kolo::hierarchical {

Status HierarchicalTransport::create(transport::ControlPlane& control,
                                     std::unique_ptr<shm::ShmTransport> node,
                                     std::shared_ptr<transport::CrossEngine> cross,
                                     std::unique_ptr<HierarchicalTransport>* out) {
  if (node == nullptr || node->collectives_engine() == nullptr || cross == nullptr)
    return internal_error("hierarchical: composed without its node or cross-node engine");
  const transport::Topology& topo = control.topology();
  if (cross->rank() != topo.cross_rank || cross->size() != topo.cross_size ||
      node->allreduce_engine().local_size() != topo.local_size) {
    return internal_error("hierarchical: the engines' groups (cross rank " +
                          std::to_string(cross->rank()) + " of " + std::to_string(cross->size()) +
                          ", node of " + std::to_string(node->allreduce_engine().local_size()) +
                          ") differ from the topology's (" + std::to_string(topo.cross_rank) +
                          " of " + std::to_string(topo.cross_size) + ", " +
                          std::to_string(topo.local_size) + ")");
  }
  std::unique_ptr<HierarchicalTransport> t(new HierarchicalTransport());
  KOLO_RETURN_IF_ERROR(HierarchicalCollectives::create(control, *node->collectives_engine(), cross,
                                                       &t->collectives_));
  t->node_ = std::move(node);
  t->cross_ = std::move(cross);
  *out = std::move(t);
  return Status::OK();
}

Status HierarchicalTransport::supports(const transport::Bucket& bucket) const {
  return shm::shm_supports(name(), bucket);
}

// The node's engine takes the tensors in place, applies the prescale as it reads
// them and the output factor to each shard after the inter-node step — except
// with one rank per node, where every tensor would go through the cross ring on
// its own: then the shared helper packs (reduce_contiguous).
std::unique_ptr<transport::Work> HierarchicalTransport::allreduce(const transport::Bucket& bucket) {
  const DataType dtype = bucket.dtype;
  const transport::Reduction& r = bucket.reduction;
  shm::ShmAllreduce& node = node_->allreduce_engine();
  // The ranks of a cross group share a local rank and a node size, so they run
  // the same slices with the same shard counts and their ring calls match.
  std::function<Status(void*, int64_t)> across_nodes = [&](void* shard, int64_t count) {
    return cross_->allreduce(shard, count, dtype, r.op);
  };
  if (node.local_size() == 1) {
    shm::ShmAllreduce::ShardStage stage;
    stage.apply = across_nodes;
    return transport::reduce_contiguous(bucket, [&](const void* in, void* out, int64_t count) {
      return std::make_unique<transport::CompletedWork>(node.run(in, out, count, dtype, r.op, stage));
    });
  }
  const shm::ShmAllreduce::ShardStage stage = shm::finish_stage(r, dtype, across_nodes);
  return std::make_unique<transport::CompletedWork>(node.run(bucket.tensors, dtype, r.op, stage, r.prescale));
}

}  // namespace kolo::hierarchical
