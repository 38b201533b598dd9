// kolo's own CUDA kernels for the NCCL transport: the batched copy that packs
// tensors into a device fusion buffer and unpacks them out of it (with the
// AVERAGE scale folded in), and the finishing steps of AVERAGE on a buffer.
//
// Contract for all three: the work is queued on `stream` (a cudaStream_t; null:
// the legacy default stream) of the current device, which must own the memory;
// nothing blocks the host, nothing is allocated, and the returned Status reports
// only argument errors and launch errors (cudaGetLastError after each launch;
// it can also report an earlier asynchronous error of the same thread's device).
// Errors that happen while a kernel runs surface at the stream's next
// synchronisation point. Any thread; pointers must not partially overlap.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "common/dtype.h"
#include "common/status.h"
#include "transports/nccl/copy_plan.h"

namespace kolo::nccl {

// Copies every segment src -> dst, multiplying each element by `factor`:
// float16 and bfloat16 are computed in float and rounded once, float32 in float,
// float64 in double (as the CPU's reduce::scale), factor 1 is an exact copy, and
// integer and bool dtypes accept only factor 1. src == nullptr: dst is zero-filled.
// One kernel launch per CopyLaunch of plan_batched_copy (see copy_plan.h); none
// when every segment is empty.
Status batched_copy(const std::vector<CopySegment>& segments, DataType dtype, double factor,
                    cudaStream_t stream);

// dst[i] = src[i] * factor for a floating dtype; dst may equal src (then factor 1
// launches nothing).
Status scale(void* dst, const void* src, int64_t count, DataType dtype, double factor,
             cudaStream_t stream);

// data[i] /= divisor, truncating toward zero (C++ division), for the integer
// dtypes (kolo's integer AVERAGE); divisor >= 1, and 1 launches nothing.
Status divide_integer(void* data, int64_t count, DataType dtype, int divisor,
                      cudaStream_t stream);

}  // namespace kolo::nccl
