#include "transports/mpi/mpi_factory.h"

#include <mpi.h>

#include "algorithms/adasum.h"
#include "algorithms/ring_allreduce.h"
#include "transports/mpi/hierarchical_transport.h"
#include "transports/mpi/mpi_check.h"
#include "transports/mpi/mpi_transport.h"
#include "transports/mpi/mpi_wait.h"
#include "transports/nccl/nccl_factory.h"
#include "transports/shm/transport.h"

namespace kolo::mpi {

Status MpiFactory::native(std::unique_ptr<transport::Transport>* out) {
  std::unique_ptr<MpiTransport> t;
  KOLO_RETURN_IF_ERROR(MpiTransport::create(comms_, &t));
  *out = std::move(t);
  return Status::OK();
}

Status MpiFactory::ring(std::unique_ptr<transport::Transport>* out) {
  *out = algorithms::make_ring_transport(p2p_);
  return Status::OK();
}

Status MpiFactory::adasum(std::unique_ptr<transport::Transport>* out) {
  *out = algorithms::make_adasum_transport(p2p_);
  return Status::OK();
}

// The node layer was made with slots of `slot_bytes` (node_options in mpi_world.cc).
Status MpiFactory::shared_memory(size_t slot_bytes, std::unique_ptr<transport::Transport>* out) {
  if (shm::ShmAllreduce::slot_size(slot_bytes) !=
      shm::ShmAllreduce::slot_size(node_->options().allreduce_slot_bytes)) {
    return internal_error("shm: the node layer's slots are " +
                          std::to_string(node_->options().allreduce_slot_bytes) +
                          " bytes, not " + std::to_string(slot_bytes));
  }
  std::unique_ptr<shm::ShmAllreduce> engine;
  KOLO_RETURN_IF_ERROR(shm::ShmAllreduce::create(node_, comms_->liveness.get(), {}, &engine));
  std::unique_ptr<shm::ShmCollectives> collectives;
  KOLO_RETURN_IF_ERROR(shm::ShmCollectives::create(node_, comms_->liveness.get(), {}, &collectives));
  *out = std::make_unique<shm::ShmTransport>(std::move(engine), std::move(collectives));
  return Status::OK();
}

Status MpiFactory::equal_nodes(bool* out) {
  // max(local_size) and max(-local_size) in one call: equal iff they negate.
  const int local_size = control_.topology().local_size;
  int mine[2] = {local_size, -local_size};
  int all[2] = {0, 0};
  MPI_Request request;
  KOLO_MPI_CHECK(MPI_Iallreduce(mine, all, 2, MPI_INT, MPI_MAX, comms_->control, &request));
  KOLO_RETURN_IF_ERROR_AS_IS(wait(&request, comms_->liveness.get()));
  *out = all[0] == -all[1];
  return Status::OK();
}

Status MpiFactory::cross(std::shared_ptr<transport::CrossEngine>* out) {
  std::unique_ptr<CrossRing> ring;
  KOLO_RETURN_IF_ERROR(CrossRing::create(comms_, &ring));
  *out = std::move(ring);
  return Status::OK();
}

Status MpiFactory::hierarchical(std::shared_ptr<transport::CrossEngine> cross,
                                std::unique_ptr<transport::Transport>* out) {
  if (node_->options().allreduce_slot_bytes != HierarchicalTransport::kSlotBytes)
    return internal_error("hierarchical: the node layer was made without its slots");
  std::unique_ptr<shm::ShmAllreduce> node_stage;
  KOLO_RETURN_IF_ERROR(shm::ShmAllreduce::create(node_, comms_->liveness.get(), {}, &node_stage));
  std::unique_ptr<shm::ShmCollectives> node_collectives;
  KOLO_RETURN_IF_ERROR(
      shm::ShmCollectives::create(node_, comms_->liveness.get(), {}, &node_collectives));
  std::unique_ptr<HierarchicalTransport> t;
  KOLO_RETURN_IF_ERROR(HierarchicalTransport::create(comms_, std::move(node_stage),
                                                     std::move(node_collectives),
                                                     std::move(cross), &t));
  *out = std::move(t);
  return Status::OK();
}

Status MpiFactory::device(size_t fusion_bytes, std::shared_ptr<transport::CrossEngine> cross,
                          std::unique_ptr<transport::Transport>* out,
                          transport::DeviceSupport** support) {
  // NCCL's communicators are set up over the MPI control plane.
  return nccl::make_nccl_transport(control_, fusion_bytes, std::move(cross), out, support);
}

}  // namespace kolo::mpi
