// How one reduction runs on NCCL, shared by the allreduce and the collectives of
// the NCCL transport (nccl_transport.cc, nccl_collectives.cc).
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <memory>

#include "common/dtype.h"
#include "common/status.h"
#include "transport/device.h"

namespace kolo::nccl {

// NCCL's dtype and op, and what the kernels around the call do. AVERAGE is a SUM
// followed by 1/size (floating: folded into the output factor; integers: a
// truncating division), so results match the CPU path's rounding.
struct Reduction {
  ncclDataType_t dtype;
  ncclRedOp_t op;
  double in_factor = 1.0;
  double out_factor = 1.0;
  bool divide = false;  // integer AVERAGE
};

// Unsupported (naming the dtype or op) where NCCL has no such type or op.
Status plan_reduction(DataType dtype, ReduceOp op, double prescale, double postscale, int size,
                      Reduction* r);

// Applies out_factor and the integer division to `count` elements at `data`.
Status finish_in_place(const Reduction& r, void* data, int64_t count, DataType dtype, int size,
                       cudaStream_t stream);

// Makes `stream` wait for a tensor's ready event (a CudaEvent); null: ready now.
Status wait_ready(const std::shared_ptr<transport::DeviceEvent>& ready, cudaStream_t stream);

}  // namespace kolo::nccl
