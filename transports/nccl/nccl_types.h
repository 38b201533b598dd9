// kolo's vocabulary in NCCL's and CUDA's terms, and back: the NCCL data type and
// reduction of a kolo dtype and op, and the Status of an ncclResult_t or
// cudaError_t. Used by the NCCL transport at its boundary (docs/design.md, The
// seams: a transport converts its native errors into Status).
//
// Error mapping (nccl_status, cuda_status); `what` is the call that failed:
//   ncclSuccess, cudaSuccess            -> OK
//   ncclInvalidArgument, ncclInvalidUsage
//                                       -> kInvalidArgument  (a caller can cause it:
//                                          a bad buffer, count or communicator use)
//   ncclInProgress                      -> kInProgress (non-blocking communicators)
//   any other ncclResult_t              -> kTransport
//   any other cudaError_t               -> kTransport
// NCCL messages read "<what>: <ncclGetErrorString> (<ncclGetLastError>)", the
// parenthesis only when NCCL has recorded a last error; CUDA messages read
// "<what>: <cudaGetErrorName>: <cudaGetErrorString>". Neither function touches a
// device, so both work on a machine without a GPU.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "common/check.h"
#include "common/dtype.h"
#include "common/status.h"

namespace kolo::nccl {

// uint8 int8 int32 int64 float16 bfloat16 float32 float64 map to NCCL's types of
// the same name; bool travels as ncclUint8 (0 or 1, reduced as or/and by
// to_nccl_op). uint16 and int16 are kUnsupported: NCCL has no 16-bit integer type.
// An invalid dtype is kInvalidArgument.
Status to_nccl_dtype(DataType dtype, ncclDataType_t* out);

// SUM, MIN, MAX and PRODUCT map to ncclSum, ncclMin, ncclMax, ncclProd. For bool
// (0/1 carried as uint8): SUM and MAX -> ncclMax (or), MIN and PRODUCT -> ncclMin
// (and). AVERAGE is kInternal: the transport sums and then scales (floating
// dtypes) or divides (integer dtypes) itself, so asking for it is a bug in kolo.
// An invalid op is kInvalidArgument.
Status to_nccl_op(ReduceOp op, DataType dtype, ncclRedOp_t* out);

// See the mapping above.
Status nccl_status(ncclResult_t result, const char* what);
Status cuda_status(cudaError_t result, const char* what);

}  // namespace kolo::nccl

// Return from the enclosing function with the mapped Status (file:line in its
// where()) if `call` fails; `call`'s text is the message's `what`.
#define KOLO_NCCL_RETURN_IF_ERROR(call)                                              \
  do {                                                                               \
    ::kolo::Status kolo_nccl_s_ = ::kolo::nccl::nccl_status((call), #call);          \
    if (!kolo_nccl_s_.ok())                                                          \
      return kolo_nccl_s_.with_location(__FILE__, __LINE__);                         \
  } while (0)

#define KOLO_CUDA_RETURN_IF_ERROR(call)                                              \
  do {                                                                               \
    ::kolo::Status kolo_cuda_s_ = ::kolo::nccl::cuda_status((call), #call);          \
    if (!kolo_cuda_s_.ok())                                                          \
      return kolo_cuda_s_.with_location(__FILE__, __LINE__);                         \
  } while (0)
