#include "transports/nccl/nccl_reduction.h"

#include "transports/nccl/device_kernels.h"
#include "transports/nccl/nccl_transport.h"
#include "transports/nccl/nccl_types.h"

namespace kolo::nccl {

Status to_nccl(DataType dtype, ReduceOp op, NcclOp* out) {
  KOLO_RETURN_IF_ERROR_AS_IS(to_nccl_dtype(dtype, &out->dtype));
  return to_nccl_op(op, dtype, &out->op);
}

Status finish_in_place(const transport::Reduction& r, void* data, int64_t count, DataType dtype,
                       cudaStream_t stream) {
  if (count == 0) return Status::OK();
  if (r.postscale != 1.0 && is_floating(dtype))
    KOLO_RETURN_IF_ERROR(scale(data, data, count, dtype, r.postscale, stream));
  if (r.divide != 1) KOLO_RETURN_IF_ERROR(divide_integer(data, count, dtype, static_cast<int>(r.divide), stream));
  return Status::OK();
}

Status wait_ready(const std::shared_ptr<transport::DeviceEvent>& ready, cudaStream_t stream) {
  if (ready == nullptr) return Status::OK();
  const auto* event = static_cast<const CudaEvent*>(ready.get());
  return cuda_status(cudaStreamWaitEvent(stream, event->get(), 0), "cudaStreamWaitEvent");
}

}  // namespace kolo::nccl
