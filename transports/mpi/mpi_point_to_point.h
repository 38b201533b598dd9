// PointToPoint over MPI: the verbs kolo's own algorithms (the ring) run on.
//
// Contract (see transport/point_to_point.h): one thread (the coordinator) calls
// it; every request is waited on exactly once; the caller's buffers stay valid
// until then. Messages go on kolo's data communicator as MPI_BYTE with the
// caller's tag, so MPI's non-overtaking rule gives the per-(peer, tag) order.
//
// A message longer than `max_message_bytes` (default 1 GiB, below MPI's INT_MAX
// count limit) travels as several MPI messages of at most that size, in order,
// on the same tag; the receiver splits the same way because it posts the same
// length. (A receive posted with a different length than was sent is an error
// either way: MPI reports truncation, or the byte count check below fails; only
// when both lengths are over the split size can such a mismatch go unnoticed.)
#pragma once

#include <mpi.h>

#include <cstddef>
#include <unordered_map>
#include <vector>

#include "transport/point_to_point.h"
#include "transports/mpi/mpi_comm.h"

namespace kolo::mpi {

class MpiPointToPoint : public transport::PointToPoint {
 public:
  static constexpr size_t kDefaultMaxMessageBytes = size_t{1} << 30;

  // Uses comms->data (kept alive while this object lives).
  MpiPointToPoint(SharedComms comms, size_t max_message_bytes = kDefaultMaxMessageBytes);
  // Requests still outstanding are waited for (politely): MPI must not write into
  // memory whose owner has moved on.
  ~MpiPointToPoint() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  Status isend(int peer, const void* data, size_t bytes, int tag,
               transport::RequestId* id) override;
  Status irecv(int peer, void* data, size_t bytes, int tag, transport::RequestId* id) override;
  Status wait(transport::RequestId id) override;
  Status test(transport::RequestId id, bool* done) override;

 private:
  // One isend/irecv: its MPI messages (pieces), and what each receive must get.
  struct Request {
    bool is_receive = false;
    int peer = 0;
    int tag = 0;
    std::vector<MPI_Request> pieces;
    std::vector<size_t> piece_bytes;
    size_t completed = 0;  // pieces[0..completed) are done and checked
    Status status;         // the first error, kept for wait()
  };

  Status check_args(int peer, size_t bytes, int tag) const;
  Status post(bool is_receive, int peer, void* data, size_t bytes, int tag,
              transport::RequestId* id);
  // Tests the first piece not yet done; for a receive, checks its byte count.
  Status test_next_piece(Request* request, bool* piece_done);
  // Tests the pieces in order; true when all are done (or one failed, which is
  // then in request->status).
  bool progress(Request* request);

  SharedComms comms_;
  MPI_Comm comm_;
  int rank_ = 0;
  int size_ = 1;
  int tag_ub_ = 32767;  // the smallest upper bound MPI guarantees
  size_t max_message_bytes_;
  transport::RequestId next_id_ = 1;
  std::unordered_map<transport::RequestId, Request> requests_;
};

}  // namespace kolo::mpi
