#include "transports/mpi/mpi_point_to_point.h"

#include <algorithm>
#include <climits>
#include <string>

#include "common/check.h"
#include "transports/mpi/mpi_check.h"
#include "transports/mpi/mpi_wait.h"

namespace kolo::mpi {

MpiPointToPoint::MpiPointToPoint(SharedComms comms, size_t max_message_bytes)
    : comms_(std::move(comms)), comm_(comms_->data), max_message_bytes_(max_message_bytes) {
  KOLO_CHECK(max_message_bytes_ > 0 && max_message_bytes_ <= static_cast<size_t>(INT_MAX));
  KOLO_CHECK_EQ(MPI_Comm_rank(comm_, &rank_), MPI_SUCCESS);
  KOLO_CHECK_EQ(MPI_Comm_size(comm_, &size_), MPI_SUCCESS);
  int* tag_ub = nullptr;
  int found = 0;
  if (MPI_Comm_get_attr(comm_, MPI_TAG_UB, &tag_ub, &found) == MPI_SUCCESS && found) {
    tag_ub_ = *tag_ub;
  }
}

MpiPointToPoint::~MpiPointToPoint() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  for (auto& [id, request] : requests_) {
    for (MPI_Request& piece : request.pieces) {
      if (piece == MPI_REQUEST_NULL) continue;
      // A wait ended by a failed peer leaves the piece: MPI keeps it (and never
      // completes it, the peer being gone).
      if (!mpi::wait(&piece, comms_->liveness.get()).ok()) MPI_Request_free(&piece);
    }
  }
}

Status MpiPointToPoint::check_args(int peer, size_t bytes, int tag) const {
  if (peer < 0 || peer >= size_) {
    return invalid_argument("peer " + std::to_string(peer) + " outside 0.." +
                            std::to_string(size_ - 1));
  }
  if (tag < 0 || tag > tag_ub_) {
    return invalid_argument("tag " + std::to_string(tag) + " outside MPI's 0.." +
                            std::to_string(tag_ub_));
  }
  return Status::OK();
}

Status MpiPointToPoint::isend(int peer, const void* data, size_t bytes, int tag,
                              transport::RequestId* id) {
  // MPI_Isend does not write through the pointer; post() is shared with irecv.
  Status s = post(false, peer, const_cast<void*>(data), bytes, tag, id);
  // Note [An MPI error while a peer fails] (mpi_wait.h): a post can meet it too.
  if (s.code() == Code::kTransport) s = explain_mpi_error(std::move(s), comms_->liveness.get());
  return s;
}

Status MpiPointToPoint::irecv(int peer, void* data, size_t bytes, int tag,
                              transport::RequestId* id) {
  Status s = post(true, peer, data, bytes, tag, id);
  if (s.code() == Code::kTransport) s = explain_mpi_error(std::move(s), comms_->liveness.get());
  return s;
}

Status MpiPointToPoint::post(bool is_receive, int peer, void* data, size_t bytes, int tag,
                             transport::RequestId* id) {
  KOLO_RETURN_IF_ERROR(check_args(peer, bytes, tag));
  // Registered before posting: if a later piece fails to post, the earlier ones
  // are still in flight and the destructor must find them.
  const transport::RequestId my_id = next_id_++;
  Request& request = requests_[my_id];
  request.is_receive = is_receive;
  request.peer = peer;
  request.tag = tag;
  const size_t pieces = bytes == 0 ? 1 : (bytes + max_message_bytes_ - 1) / max_message_bytes_;
  request.pieces.assign(pieces, MPI_REQUEST_NULL);
  request.piece_bytes.resize(pieces);
  char* base = static_cast<char*>(data);
  for (size_t k = 0; k < pieces; ++k) {
    const size_t offset = k * max_message_bytes_;
    const size_t length = std::min(max_message_bytes_, bytes - offset);
    request.piece_bytes[k] = length;
    const int count = static_cast<int>(length);
    if (is_receive) {
      KOLO_MPI_CHECK(MPI_Irecv(base + offset, count, MPI_BYTE, peer, tag, comm_,
                               &request.pieces[k]));
    } else {
      KOLO_MPI_CHECK(MPI_Isend(base + offset, count, MPI_BYTE, peer, tag, comm_,
                               &request.pieces[k]));
    }
  }
  *id = my_id;
  return Status::OK();
}

Status MpiPointToPoint::test_next_piece(Request* request, bool* piece_done) {
  MPI_Status status;
  int flag = 0;
  KOLO_MPI_CHECK(MPI_Test(&request->pieces[request->completed], &flag, &status));
  *piece_done = flag != 0;
  if (!flag || !request->is_receive) return Status::OK();
  int received = 0;
  KOLO_MPI_CHECK(MPI_Get_count(&status, MPI_BYTE, &received));
  const size_t posted = request->piece_bytes[request->completed];
  if (static_cast<size_t>(received) != posted) {
    return transport_error("received " + std::to_string(received) + " bytes from rank " +
                           std::to_string(request->peer) + " (tag " +
                           std::to_string(request->tag) + ") into a receive of " +
                           std::to_string(posted) + " bytes");
  }
  return Status::OK();
}

bool MpiPointToPoint::progress(Request* request) {
  while (request->status.ok() && request->completed < request->pieces.size()) {
    bool piece_done = false;
    request->status = test_next_piece(request, &piece_done);
    if (!piece_done) break;
    ++request->completed;
  }
  return !request->status.ok() || request->completed == request->pieces.size();
}

Status MpiPointToPoint::wait(transport::RequestId id) {
  auto it = requests_.find(id);
  if (it == requests_.end()) {
    return internal_error("wait on unknown point-to-point request " + std::to_string(id));
  }
  Request& request = it->second;
  Waiter waiter;
  Liveness* alive = comms_->liveness.get();
  while (!progress(&request)) {
    if (alive) {
      if (Status s = alive->check(); !s.ok()) request.status = s;
      if (!request.status.ok()) break;
    }
    waiter.pause();
  }
  // Notes [A completed wait asks liveness too], [An MPI error while a peer fails].
  if (request.status.ok() && alive) request.status = alive->check_now();
  if (request.status.code() == Code::kTransport) request.status = explain_mpi_error(request.status, alive);
  // After an error the remaining pieces may never complete (the peer sent
  // something else): let MPI have them. The world is broken at this point.
  for (MPI_Request& piece : request.pieces) {
    if (piece != MPI_REQUEST_NULL) MPI_Request_free(&piece);
  }
  Status status = request.status;
  requests_.erase(it);
  return status;
}

Status MpiPointToPoint::test(transport::RequestId id, bool* done) {
  auto it = requests_.find(id);
  if (it == requests_.end()) {
    return internal_error("test on unknown point-to-point request " + std::to_string(id));
  }
  *done = progress(&it->second);
  return Status::OK();
}

}  // namespace kolo::mpi
