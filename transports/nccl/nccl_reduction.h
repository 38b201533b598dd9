// How one reduction runs on NCCL, shared by the allreduce and the collectives of
// the NCCL transport (nccl_transport.cc, nccl_collectives.cc).
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <memory>

#include "common/dtype.h"
#include "common/status.h"
#include "transport/device.h"
#include "transport/transport.h"

namespace kolo::nccl {

// NCCL's dtype and op for a reduction decided by transport::decide_reduction
// (never AVERAGE). Unsupported (naming the dtype or op) where NCCL has no such
// type or op. The kernels around the NCCL call apply the factors.
struct NcclOp {
  ncclDataType_t dtype;
  ncclRedOp_t op;
};
Status to_nccl(DataType dtype, ReduceOp op, NcclOp* out);

// Applies the reduction's output part (postscale, or the integer division) to
// `count` elements at `data`, on `stream`.
Status finish_in_place(const transport::Reduction& r, void* data, int64_t count, DataType dtype,
                       cudaStream_t stream);

// Makes `stream` wait for a tensor's ready event (a CudaEvent); null: ready now.
Status wait_ready(const std::shared_ptr<transport::DeviceEvent>& ready, cudaStream_t stream);

}  // namespace kolo::nccl
