#include "transports/nccl/nccl_types.h"

#include <string>

namespace kolo::nccl {

Status to_nccl_dtype(DataType dtype, ncclDataType_t* out) {
  switch (dtype) {
    case DataType::kUint8: *out = ncclUint8; return Status::OK();
    case DataType::kInt8: *out = ncclInt8; return Status::OK();
    case DataType::kInt32: *out = ncclInt32; return Status::OK();
    case DataType::kInt64: *out = ncclInt64; return Status::OK();
    case DataType::kFloat16: *out = ncclFloat16; return Status::OK();
    case DataType::kBfloat16: *out = ncclBfloat16; return Status::OK();
    case DataType::kFloat32: *out = ncclFloat32; return Status::OK();
    case DataType::kFloat64: *out = ncclFloat64; return Status::OK();
    case DataType::kBool: *out = ncclUint8; return Status::OK();
    case DataType::kUint16:
    case DataType::kInt16:
      return unsupported("dtype " + dtype_name(dtype) +
                         " cannot travel over NCCL: NCCL has no 16-bit integer type");
  }
  return invalid_argument("invalid dtype " + dtype_name(dtype));
}

Status to_nccl_op(ReduceOp op, DataType dtype, ncclRedOp_t* out) {
  const bool is_bool = dtype == DataType::kBool;
  switch (op) {
    case ReduceOp::kSum: *out = is_bool ? ncclMax : ncclSum; return Status::OK();
    case ReduceOp::kMax: *out = ncclMax; return Status::OK();
    case ReduceOp::kMin: *out = ncclMin; return Status::OK();
    case ReduceOp::kProduct: *out = is_bool ? ncclMin : ncclProd; return Status::OK();
    case ReduceOp::kAverage:
      return internal_error("average has no NCCL op here: the NCCL transport sums and "
                            "then scales or divides");
    case ReduceOp::kAdasum:
      return unsupported("adasum has no NCCL op: kolo computes Adasum on CPU tensors only");
  }
  return invalid_argument("invalid reduce op " + op_name(op));
}

Status nccl_status(ncclResult_t result, const char* what) {
  if (result == ncclSuccess) return Status::OK();
  std::string message = std::string(what) + ": " + ncclGetErrorString(result);
  const char* last = ncclGetLastError(nullptr);
  if (last != nullptr && last[0] != '\0') message += std::string(" (") + last + ")";
  switch (result) {
    case ncclInvalidArgument:
    case ncclInvalidUsage:
      return invalid_argument(std::move(message));
    case ncclInProgress:
      return Status(Code::kInProgress, std::move(message));
    default:
      return transport_error(std::move(message));
  }
}

Status cuda_status(cudaError_t result, const char* what) {
  if (result == cudaSuccess) return Status::OK();
  return transport_error(std::string(what) + ": " + cudaGetErrorName(result) + ": " +
                         cudaGetErrorString(result));
}

}  // namespace kolo::nccl
