#include "transports/socket/socket_point_to_point.h"

#include "common/check.h"

namespace kolo::socket {

Status SocketPointToPoint::world_rank(int peer, int* out) const {
  if (peer < 0 || peer >= size())
    return invalid_argument("point-to-point peer " + std::to_string(peer) + " outside 0.." +
                            std::to_string(size() - 1));
  *out = members_[static_cast<size_t>(peer)];
  return Status::OK();
}

Status SocketPointToPoint::isend(int peer, const void* data, size_t bytes, int tag,
                                 transport::RequestId* id) {
  int to = 0;
  KOLO_RETURN_IF_ERROR(world_rank(peer, &to));
  return engine_->isend(channel_, to, data, bytes, tag, id);
}

Status SocketPointToPoint::irecv(int peer, void* data, size_t bytes, int tag,
                                 transport::RequestId* id) {
  int from = 0;
  KOLO_RETURN_IF_ERROR(world_rank(peer, &from));
  return engine_->irecv(channel_, from, data, bytes, tag, id);
}

}  // namespace kolo::socket
