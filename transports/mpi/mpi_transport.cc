#include "transports/mpi/mpi_transport.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "common/check.h"
#include "reduce/reduce.h"
#include "transport/reduction.h"
#include "common/failpoint.h"
#include "transports/mpi/mpi_check.h"
#include "transports/mpi/mpi_work.h"

namespace kolo::mpi {
namespace {

constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct};

int op_index(ReduceOp op) {
  for (int i = 0; i < 4; ++i) {
    if (kOps[i] == op) return i;
  }
  ::kolo::detail::check_failed(__FILE__, __LINE__, "no MPI op for " + op_name(op));
}

// MPI's user-op signature: inout[i] = in[i] (op) inout[i]. The ops are
// commutative, so the order of the operands does not matter.
template <DataType D, ReduceOp O>
void kolo_user_op(void* in, void* inout, int* len, MPI_Datatype*) {
  reduce::reduce(inout, in, inout, *len, D, O);
}

template <DataType D>
constexpr MPI_User_function* kUserOps[] = {
    &kolo_user_op<D, ReduceOp::kSum>, &kolo_user_op<D, ReduceOp::kMin>,
    &kolo_user_op<D, ReduceOp::kMax>, &kolo_user_op<D, ReduceOp::kProduct>};

MPI_Datatype native_type(DataType dtype) {
  switch (dtype) {
    case DataType::kUint8: return MPI_UINT8_T;
    case DataType::kInt8: return MPI_INT8_T;
    case DataType::kUint16: return MPI_UINT16_T;
    case DataType::kInt16: return MPI_INT16_T;
    case DataType::kInt32: return MPI_INT32_T;
    case DataType::kInt64: return MPI_INT64_T;
    case DataType::kFloat32: return MPI_FLOAT;
    case DataType::kFloat64: return MPI_DOUBLE;
    case DataType::kBool: return MPI_UINT8_T;
    default: return MPI_DATATYPE_NULL;
  }
}

MPI_Op native_op(DataType dtype, ReduceOp op) {
  if (dtype == DataType::kBool) {
    return op == ReduceOp::kSum || op == ReduceOp::kMax ? MPI_LOR : MPI_LAND;
  }
  switch (op) {
    case ReduceOp::kSum: return MPI_SUM;
    case ReduceOp::kMin: return MPI_MIN;
    case ReduceOp::kMax: return MPI_MAX;
    case ReduceOp::kProduct: return MPI_PROD;
    default: return MPI_OP_NULL;
  }
}

}  // namespace

MpiTransport::MpiTransport(SharedComms comms, int64_t max_count_per_call)
    : comms_(std::move(comms)), comm_(comms_->data), max_count_per_call_(max_count_per_call) {
  KOLO_CHECK(max_count_per_call_ > 0 && max_count_per_call_ <= kMaxCountPerCall);
}

Status MpiTransport::create(SharedComms comms, std::unique_ptr<MpiTransport>* out,
                            int64_t max_count_per_call) {
  std::unique_ptr<MpiTransport> transport(
      new MpiTransport(std::move(comms), max_count_per_call));
  KOLO_RETURN_IF_ERROR(transport->create_half_types());
  *out = std::move(transport);
  return Status::OK();
}

Status MpiTransport::create_half_types() {
  for (MPI_Datatype* type : {&float16_type_, &bfloat16_type_}) {
    KOLO_MPI_CHECK(MPI_Type_contiguous(1, MPI_UINT16_T, type));
    KOLO_MPI_CHECK(MPI_Type_commit(type));
  }
  for (int i = 0; i < kNumOps; ++i) {
    KOLO_MPI_CHECK(MPI_Op_create(kUserOps<DataType::kFloat16>[i], 1, &float16_ops_[i]));
    KOLO_MPI_CHECK(MPI_Op_create(kUserOps<DataType::kBfloat16>[i], 1, &bfloat16_ops_[i]));
  }
  return Status::OK();
}

MpiTransport::~MpiTransport() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  for (MPI_Datatype* type : {&float16_type_, &bfloat16_type_}) {
    if (*type != MPI_DATATYPE_NULL) MPI_Type_free(type);
  }
  for (int i = 0; i < kNumOps; ++i) {
    if (float16_ops_[i] != MPI_OP_NULL) MPI_Op_free(&float16_ops_[i]);
    if (bfloat16_ops_[i] != MPI_OP_NULL) MPI_Op_free(&bfloat16_ops_[i]);
  }
}

Status MpiTransport::supports(const transport::Bucket& bucket) const {
  if (bucket.device.kind != DeviceKind::kCpu) {
    return unsupported("the mpi transport reduces CPU memory only, not " +
                       device_name(bucket.device));
  }
  if (!is_valid(bucket.dtype)) return unsupported("invalid dtype " + dtype_name(bucket.dtype));
  if (!is_elementwise(bucket.reduction.op)) {
    return unsupported("the mpi transport reduces with sum, min, max or product, not " +
                       op_name(bucket.reduction.op) + " (decide_reduction turns average into sum)");
  }
  if (bucket.count < 0) return unsupported("negative count " + std::to_string(bucket.count));
  return Status::OK();
}

void MpiTransport::mpi_type_and_op(DataType dtype, ReduceOp op, MPI_Datatype* type,
                                   MPI_Op* mpi_op) const {
  if (dtype == DataType::kFloat16) {
    *type = float16_type_;
    *mpi_op = float16_ops_[op_index(op)];
  } else if (dtype == DataType::kBfloat16) {
    *type = bfloat16_type_;
    *mpi_op = bfloat16_ops_[op_index(op)];
  } else {
    *type = native_type(dtype);
    *mpi_op = native_op(dtype, op);
  }
  KOLO_CHECK(*type != MPI_DATATYPE_NULL && *mpi_op != MPI_OP_NULL);
}

std::unique_ptr<transport::Work> MpiTransport::allreduce(const transport::Bucket& bucket) {
  Status supported = supports(bucket);
  if (!supported.ok()) return std::make_unique<transport::CompletedWork>(supported);
  // MPI reduces one buffer and applies no factor: the shared helper packs and scales.
  return transport::reduce_contiguous(bucket, [&](const void* in, void* out, int64_t count) {
    return start_allreduce(in, out, count, bucket.dtype, bucket.reduction.op);
  });
}

std::unique_ptr<transport::Work> MpiTransport::start_allreduce(const void* in, void* out,
                                                               int64_t count, DataType dtype,
                                                               ReduceOp reduce_op) {
  MPI_Datatype type;
  MPI_Op op;
  mpi_type_and_op(dtype, reduce_op, &type, &op);
  const bool in_place = in == out;
  const size_t element = dtype_size(dtype);
  const char* input = static_cast<const char*>(in);
  char* output = static_cast<char*>(out);

  // The MPI requests of one bucket: one per slice of at most the limit.
  auto work = std::make_unique<MpiWork>(comms_->liveness.get());
  Status started;
  for (int64_t offset = 0; offset < count && started.ok(); offset += max_count_per_call_) {
    const int n = static_cast<int>(std::min(max_count_per_call_, count - offset));
    const size_t byte_offset = static_cast<size_t>(offset) * element;
    MPI_Request request = MPI_REQUEST_NULL;
    int rc = MPI_Iallreduce(in_place ? MPI_IN_PLACE : input + byte_offset,
                            output + byte_offset, n, type, op, comm_, &request);
    if (rc != MPI_SUCCESS) {
      started = mpi_error(rc, "MPI_Iallreduce", __FILE__, __LINE__);
    } else {
      work->add(request);
    }
  }
  if (!started.ok()) work->fail(std::move(started));
  failpoint("mpi");
  return work;
}

}  // namespace kolo::mpi
