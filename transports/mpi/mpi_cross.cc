#include "transports/mpi/mpi_cross.h"

#include <climits>
#include <string>
#include <utility>

#include "transports/mpi/mpi_check.h"
#include "transports/mpi/mpi_wait.h"
#include "transports/mpi/mpi_work.h"

namespace kolo::mpi {
namespace {

// Elements to bytes in MPI's int; false if one does not fit.
bool to_int_bytes(const std::vector<int64_t>& elems, size_t elem, std::vector<int>* out) {
  out->clear();
  for (int64_t e : elems) {
    const int64_t bytes = e * static_cast<int64_t>(elem);
    if (bytes < 0 || bytes > INT_MAX) return false;
    out->push_back(static_cast<int>(bytes));
  }
  return true;
}

std::unique_ptr<transport::Work> failed(Status s) {
  return std::make_unique<transport::CompletedWork>(std::move(s));
}

std::unique_ptr<transport::Work> too_large(const char* what) {
  return failed(unsupported(std::string("mpi cross ") + what +
                            ": more than INT_MAX bytes in one MPI call"));
}

}  // namespace

Status MpiCross::create(const SharedComms& comms, std::unique_ptr<MpiCross>* out) {
  std::unique_ptr<MpiCross> c(new MpiCross());
  c->comms_ = std::make_shared<Comms>();
  c->comms_->liveness = comms->liveness;
  MPI_Request request;
  KOLO_MPI_CHECK(MPI_Comm_idup(comms->cross, &c->comms_->data, &request));
  KOLO_RETURN_IF_ERROR_AS_IS(wait(&request, comms->liveness.get()));
  KOLO_MPI_CHECK(MPI_Comm_set_errhandler(c->comms_->data, MPI_ERRORS_RETURN));
  KOLO_MPI_CHECK(MPI_Comm_rank(c->comms_->data, &c->rank_));
  KOLO_MPI_CHECK(MPI_Comm_size(c->comms_->data, &c->size_));
  c->p2p_ = std::make_unique<MpiPointToPoint>(c->comms_);
  c->ring_ = std::make_unique<algorithms::RingAllreduce>(*c->p2p_);
  KOLO_RETURN_IF_ERROR(MpiTransport::create(c->comms_, &c->mpi_));
  *out = std::move(c);
  return Status::OK();
}

int64_t MpiCross::max_call_bytes() const { return INT_MAX; }

std::unique_ptr<transport::Work> MpiCross::allgatherv(const void* input, void* output,
                                                      const std::vector<int64_t>& counts,
                                                      const std::vector<int64_t>& displs,
                                                      DataType dtype) {
  const size_t elem = dtype_size(dtype);
  if (!to_int_bytes(counts, elem, &recv_bytes_) || !to_int_bytes(displs, elem, &recv_displs_))
    return too_large("allgatherv");
  const char* mine = static_cast<const char*>(output) + recv_displs_[rank_];
  auto work = std::make_unique<MpiWork>(comms_->liveness.get());
  MPI_Request request;
  const int rc =
      input == mine
          ? MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, output, recv_bytes_.data(),
                            recv_displs_.data(), MPI_BYTE, comms_->data, &request)
          : MPI_Iallgatherv(input, recv_bytes_[rank_], MPI_BYTE, output, recv_bytes_.data(),
                            recv_displs_.data(), MPI_BYTE, comms_->data, &request);
  if (rc != MPI_SUCCESS) return failed(mpi_error(rc, "MPI_Iallgatherv", __FILE__, __LINE__));
  work->add(request);
  return work;
}

std::unique_ptr<transport::Work> MpiCross::alltoallv(const void* input,
                                                     const std::vector<int64_t>& send_counts,
                                                     const std::vector<int64_t>& send_displs,
                                                     void* output,
                                                     const std::vector<int64_t>& recv_counts,
                                                     const std::vector<int64_t>& recv_displs,
                                                     DataType dtype) {
  const size_t elem = dtype_size(dtype);
  if (!to_int_bytes(send_counts, elem, &send_bytes_) ||
      !to_int_bytes(send_displs, elem, &send_displs_) ||
      !to_int_bytes(recv_counts, elem, &recv_bytes_) ||
      !to_int_bytes(recv_displs, elem, &recv_displs_))
    return too_large("alltoallv");
  auto work = std::make_unique<MpiWork>(comms_->liveness.get());
  MPI_Request request;
  const int rc = MPI_Ialltoallv(input, send_bytes_.data(), send_displs_.data(), MPI_BYTE, output,
                                recv_bytes_.data(), recv_displs_.data(), MPI_BYTE, comms_->data,
                                &request);
  if (rc != MPI_SUCCESS) return failed(mpi_error(rc, "MPI_Ialltoallv", __FILE__, __LINE__));
  work->add(request);
  return work;
}

std::unique_ptr<transport::Work> MpiCross::broadcast(void* data, int64_t count, DataType dtype,
                                                     int root) {
  transport::CollectiveView v;
  v.dtype = dtype;
  v.input = v.output = data;
  v.count = count;
  v.root = root;
  return failed(mpi_->collective(Collective::kBroadcast, v)->wait());
}

std::unique_ptr<transport::Work> MpiCross::reducescatter(const void* input, void* output,
                                                         const std::vector<int64_t>& counts,
                                                         DataType dtype, ReduceOp op) {
  transport::CollectiveView v;
  v.dtype = dtype;
  v.reduction.op = op;
  v.input = input;
  v.output = output;
  v.recv_counts = counts;
  return failed(mpi_->collective(Collective::kReducescatter, v)->wait());
}

}  // namespace kolo::mpi
