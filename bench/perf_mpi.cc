#include "bench/perf_mpi.h"

#include <climits>
#include <cstdio>
#include <cstdlib>

#include "reduce/reduce.h"

namespace kolo::bench {
namespace {

// A user-defined MPI op that reduces 16-bit floats with kolo's kernel.
template <DataType kType, ReduceOp kOp>
void half_op(void* in, void* inout, int* len, MPI_Datatype*) {
  reduce::reduce_inplace(inout, in, *len, kType, kOp);
}

template <DataType kType>
MPI_User_function* half_function(ReduceOp op) {
  switch (op) {
    case ReduceOp::kMin:
      return &half_op<kType, ReduceOp::kMin>;
    case ReduceOp::kMax:
      return &half_op<kType, ReduceOp::kMax>;
    case ReduceOp::kProduct:
      return &half_op<kType, ReduceOp::kProduct>;
    default:
      return &half_op<kType, ReduceOp::kSum>;  // sum, and avg's sum
  }
}

MPI_Datatype mpi_type(DataType dtype) {
  switch (dtype) {
    case DataType::kUint8:
      return MPI_UINT8_T;
    case DataType::kInt8:
      return MPI_INT8_T;
    case DataType::kUint16:
      return MPI_UINT16_T;
    case DataType::kInt16:
      return MPI_INT16_T;
    case DataType::kInt32:
      return MPI_INT32_T;
    case DataType::kInt64:
      return MPI_INT64_T;
    case DataType::kFloat16:
      return MPI_UINT16_T;
    case DataType::kBfloat16:
      return MPI_UINT16_T;
    case DataType::kFloat32:
      return MPI_FLOAT;
    case DataType::kFloat64:
      return MPI_DOUBLE;
    case DataType::kBool:
      return MPI_C_BOOL;
  }
  return MPI_DATATYPE_NULL;
}

MPI_Op mpi_builtin_op(DataType dtype, ReduceOp op) {
  if (dtype == DataType::kBool) {
    return (op == ReduceOp::kMin || op == ReduceOp::kProduct) ? MPI_LAND : MPI_LOR;
  }
  switch (op) {
    case ReduceOp::kMin:
      return MPI_MIN;
    case ReduceOp::kMax:
      return MPI_MAX;
    case ReduceOp::kProduct:
      return MPI_PROD;
    default:
      return MPI_SUM;
  }
}

void check_mpi(MPI_Comm comm, int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(rc, text, &length);
  abort_job(comm, what, text);
}

}  // namespace

MpiReference::MpiReference(MPI_Comm comm, DataType dtype, ReduceOp op)
    : comm_(comm), dtype_(dtype), kolo_op_(op), mpi_type_(mpi_type(dtype)) {
  MPI_Comm_size(comm, &world_size_);
  if (dtype == DataType::kFloat16 || dtype == DataType::kBfloat16) {
    MPI_User_function* f = dtype == DataType::kFloat16 ? half_function<DataType::kFloat16>(op)
                                                       : half_function<DataType::kBfloat16>(op);
    check_mpi(comm, MPI_Op_create(f, /*commute=*/1, &mpi_op_), "MPI_Op_create");
    user_op_ = true;
  } else {
    mpi_op_ = mpi_builtin_op(dtype, op);
  }
}

MpiReference::~MpiReference() {
  if (user_op_) MPI_Op_free(&mpi_op_);
}

void MpiReference::allreduce(const void* in, void* out, int64_t count) const {
  const int n = int_count(count, "MPI_Allreduce");
  const void* send = in == out ? MPI_IN_PLACE : in;
  check_mpi(comm_, MPI_Allreduce(send, out, n, mpi_type_, mpi_op_, comm_), "MPI_Allreduce");
  finish_average(out, count);
}

void MpiReference::allgather(const void* in, void* out, int64_t count_per_rank) const {
  const int n = int_count(count_per_rank * world_size_, "MPI_Allgather") / world_size_;
  check_mpi(comm_, MPI_Allgather(in, n, mpi_type_, out, n, mpi_type_, comm_), "MPI_Allgather");
}

void MpiReference::broadcast(void* buffer, int64_t count, int root) const {
  const int n = int_count(count, "MPI_Bcast");
  check_mpi(comm_, MPI_Bcast(buffer, n, mpi_type_, root, comm_), "MPI_Bcast");
}

void MpiReference::alltoall(const void* in, void* out, int64_t count_per_peer) const {
  const int n = int_count(count_per_peer * world_size_, "MPI_Alltoall") / world_size_;
  check_mpi(comm_, MPI_Alltoall(in, n, mpi_type_, out, n, mpi_type_, comm_), "MPI_Alltoall");
}

void MpiReference::reduce_scatter(const void* in, void* out, int64_t count_per_rank) const {
  const int n = int_count(count_per_rank * world_size_, "MPI_Reduce_scatter_block") / world_size_;
  check_mpi(comm_, MPI_Reduce_scatter_block(in, out, n, mpi_type_, mpi_op_, comm_),
            "MPI_Reduce_scatter_block");
  finish_average(out, count_per_rank);
}

int MpiReference::int_count(int64_t count, const char* what) const {
  if (count > INT_MAX) abort_job(comm_, what, "count exceeds INT_MAX");
  return static_cast<int>(count);
}

void MpiReference::finish_average(void* out, int64_t count) const {
  if (kolo_op_ != ReduceOp::kAverage) return;
  if (is_floating(dtype_)) {
    reduce::scale(out, out, count, dtype_, 1.0 / world_size_);
  } else {
    reduce::divide_integer(out, count, dtype_, world_size_);
  }
}

std::vector<double> max_over_ranks(MPI_Comm comm, const std::vector<double>& local) {
  std::vector<double> result(local.size());
  check_mpi(comm,
            MPI_Allreduce(local.data(), result.data(), static_cast<int>(local.size()), MPI_DOUBLE,
                          MPI_MAX, comm),
            "MPI_Allreduce(MAX)");
  return result;
}

int64_t sum_over_ranks(MPI_Comm comm, int64_t local) {
  int64_t result = 0;
  check_mpi(comm, MPI_Allreduce(&local, &result, 1, MPI_INT64_T, MPI_SUM, comm),
            "MPI_Allreduce(SUM)");
  return result;
}

void abort_job(MPI_Comm comm, const char* what, const char* message) {
  std::fprintf(stderr, "kolo-allreduce-perf: %s: %s\n", what, message);
  std::fflush(stderr);
  MPI_Abort(comm, 1);
  std::abort();
}

}  // namespace kolo::bench
