#include "transports/socket/socket_factory.h"

#include <cstring>

#include "algorithms/adasum.h"
#include "algorithms/ring_allreduce.h"
#include "common/check.h"
#include "transports/nccl/nccl_factory.h"

namespace kolo::socket {
namespace {

constexpr const char* kNoNodeLayer =
    "the socket world's node layer (transports/shm) is not wired yet";

}  // namespace

Status SocketFactory::native(std::unique_ptr<transport::Transport>* out) {
  return unsupported("the socket world has no native collectives (those are MPI's); kolo's ring "
                     "and Adasum run over its point-to-point verbs");
}

Status SocketFactory::ring(std::unique_ptr<transport::Transport>* out) {
  *out = algorithms::make_ring_transport(p2p_);
  return Status::OK();
}

Status SocketFactory::adasum(std::unique_ptr<transport::Transport>* out) {
  *out = algorithms::make_adasum_transport(p2p_);
  return Status::OK();
}

Status SocketFactory::shared_memory(size_t, std::unique_ptr<transport::Transport>*) {
  return unsupported(kNoNodeLayer);
}

// Equal iff every rank's local size is the first rank's: one allgather.
Status SocketFactory::equal_nodes(bool* out) {
  const int32_t mine = control_.topology().local_size;
  std::vector<transport::Bytes> all;
  KOLO_RETURN_IF_ERROR_AS_IS(
      control_.allgather(transport::Bytes(reinterpret_cast<const char*>(&mine), sizeof mine), &all));
  *out = true;
  for (const transport::Bytes& b : all) *out = *out && b.size() == sizeof mine &&
                                               std::memcmp(b.data(), all[0].data(), sizeof mine) == 0;
  return Status::OK();
}

Status SocketFactory::cross(std::shared_ptr<transport::CrossEngine>*) {
  return unsupported(kNoNodeLayer);
}

Status SocketFactory::hierarchical(std::shared_ptr<transport::CrossEngine>,
                                   std::unique_ptr<transport::Transport>*) {
  return unsupported(kNoNodeLayer);
}

Status SocketFactory::device(size_t fusion_bytes, std::shared_ptr<transport::CrossEngine> cross,
                             std::unique_ptr<transport::Transport>* out,
                             transport::DeviceSupport** support) {
  return nccl::make_nccl_transport(control_, fusion_bytes, std::move(cross), out, support);
}

}  // namespace kolo::socket
