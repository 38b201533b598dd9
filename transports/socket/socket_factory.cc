#include "transports/socket/socket_factory.h"

#include <cstring>

#include "common/check.h"
#include "transports/shm/transport.h"

namespace kolo::socket {
Status SocketFactory::native(std::unique_ptr<transport::Transport>* out) {
  return unsupported("the socket world has no native collectives (those are MPI's); kolo's ring "
                     "and Adasum run over its point-to-point verbs");
}

// The node layer was made with slots of `slot_bytes` (node_options in socket_node.cc).
Status SocketFactory::node(size_t slot_bytes, std::unique_ptr<shm::ShmTransport>* out) {
  if (!node_ || node_->options().allreduce_slot_bytes == 0)
    return unsupported("the socket world runs without the node layer (see the warning at init)");
  if (shm::ShmAllreduce::slot_size(slot_bytes) !=
      shm::ShmAllreduce::slot_size(node_->options().allreduce_slot_bytes)) {
    return internal_error("shm: the node layer's slots are " +
                          std::to_string(node_->options().allreduce_slot_bytes) + " bytes, not " +
                          std::to_string(slot_bytes));
  }
  std::unique_ptr<shm::ShmAllreduce> engine;
  KOLO_RETURN_IF_ERROR(shm::ShmAllreduce::create(node_, alive_, {}, &engine));
  std::unique_ptr<shm::ShmCollectives> collectives;
  KOLO_RETURN_IF_ERROR(shm::ShmCollectives::create(node_, alive_, {}, &collectives));
  *out = std::make_unique<shm::ShmTransport>(std::move(engine), std::move(collectives));
  return Status::OK();
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

// None of its own: the registry makes kolo's over the world's verbs.
Status SocketFactory::cross(std::shared_ptr<transport::CrossEngine>* out) {
  out->reset();
  return Status::OK();
}

}  // namespace kolo::socket
