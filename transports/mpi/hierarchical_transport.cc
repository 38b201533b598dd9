#include "transports/mpi/hierarchical_transport.h"

#include <utility>

#include "transport/reduction.h"
#include "transports/mpi/mpi_check.h"
#include "transports/mpi/mpi_wait.h"
#include "transports/shm/transport.h"

namespace kolo::mpi {

Status CrossRing::create(const SharedComms& comms, std::unique_ptr<CrossRing>* out) {
  std::unique_ptr<CrossRing> r(new CrossRing());
  r->comms_ = std::make_shared<Comms>();
  r->comms_->liveness = comms->liveness;
  MPI_Request request;
  KOLO_MPI_CHECK(MPI_Comm_idup(comms->cross, &r->comms_->data, &request));
  KOLO_RETURN_IF_ERROR_AS_IS(wait(&request, comms->liveness.get()));
  KOLO_MPI_CHECK(MPI_Comm_set_errhandler(r->comms_->data, MPI_ERRORS_RETURN));
  r->p2p_ = std::make_unique<MpiPointToPoint>(r->comms_);
  r->ring_ = std::make_unique<algorithms::RingAllreduce>(*r->p2p_);
  *out = std::move(r);
  return Status::OK();
}

Status HierarchicalTransport::create(const SharedComms& comms,
                                     std::unique_ptr<shm::ShmAllreduce> node,
                                     std::unique_ptr<shm::ShmCollectives> node_collectives,
                                     std::shared_ptr<transport::CrossEngine> cross,
                                     std::unique_ptr<HierarchicalTransport>* out) {
  std::unique_ptr<HierarchicalTransport> t(new HierarchicalTransport());
  t->node_ = std::move(node);
  t->cross_ = std::move(cross);
  KOLO_RETURN_IF_ERROR(
      HierarchicalCollectives::create(comms, std::move(node_collectives), &t->collectives_));
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
  // The ranks of a cross communicator share a local rank and a node size, so they
  // run the same slices with the same shard counts and their ring calls match.
  std::function<Status(void*, int64_t)> across_nodes = [&](void* shard, int64_t count) {
    return cross_->allreduce(shard, count, dtype, r.op);
  };
  if (node_->local_size() == 1) {
    shm::ShmAllreduce::ShardStage stage;
    stage.apply = across_nodes;
    return transport::reduce_contiguous(bucket, [&](const void* in, void* out, int64_t count) {
      return std::make_unique<transport::CompletedWork>(node_->run(in, out, count, dtype, r.op, stage));
    });
  }
  const shm::ShmAllreduce::ShardStage stage = shm::finish_stage(r, dtype, across_nodes);
  return std::make_unique<transport::CompletedWork>(node_->run(bucket.tensors, dtype, r.op, stage, r.prescale));
}

}  // namespace kolo::mpi
