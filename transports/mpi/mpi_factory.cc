#include "transports/mpi/mpi_factory.h"

#include <mpi.h>

#include "transports/mpi/mpi_check.h"
#include "transports/mpi/mpi_cross.h"
#include "transports/mpi/mpi_transport.h"
#include "transports/mpi/mpi_wait.h"
#include "transports/shm/transport.h"

namespace kolo::mpi {

Status MpiFactory::native(std::unique_ptr<transport::Transport>* out) {
  std::unique_ptr<MpiTransport> t;
  KOLO_RETURN_IF_ERROR(MpiTransport::create(comms_, &t));
  *out = std::move(t);
  return Status::OK();
}

// The node layer was made with slots of `slot_bytes` (node_options in mpi_world.cc).
Status MpiFactory::node(size_t slot_bytes, std::unique_ptr<shm::ShmTransport>* out) {
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

// MPI's cross communicator, rather than kolo's engine over the world's verbs: see
// Note [The MPI world's cross engine] in mpi_cross.h.
Status MpiFactory::cross(std::shared_ptr<transport::CrossEngine>* out) {
  std::unique_ptr<MpiCross> cross;
  KOLO_RETURN_IF_ERROR(MpiCross::create(comms_, &cross));
  *out = std::move(cross);
  return Status::OK();
}

}  // namespace kolo::mpi
