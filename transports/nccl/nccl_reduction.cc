#include "transports/nccl/nccl_reduction.h"

#include "transports/nccl/device_kernels.h"
#include "transports/nccl/nccl_transport.h"
#include "transports/nccl/nccl_types.h"

namespace kolo::nccl {

Status plan_reduction(DataType dtype, ReduceOp op, double prescale, double postscale, int size,
                      Reduction* r) {
  KOLO_RETURN_IF_ERROR_AS_IS(to_nccl_dtype(dtype, &r->dtype));
  const bool average = op == ReduceOp::kAverage;
  KOLO_RETURN_IF_ERROR_AS_IS(to_nccl_op(average ? ReduceOp::kSum : op, dtype, &r->op));
  r->in_factor = prescale;
  r->out_factor = postscale;
  if (average && is_floating(dtype)) r->out_factor /= size;
  r->divide = average && !is_floating(dtype) && size > 1;
  return Status::OK();
}

Status finish_in_place(const Reduction& r, void* data, int64_t count, DataType dtype,
                       int size, cudaStream_t stream) {
  if (count == 0) return Status::OK();
  if (r.out_factor != 1.0) KOLO_RETURN_IF_ERROR(scale(data, data, count, dtype, r.out_factor, stream));
  if (r.divide) KOLO_RETURN_IF_ERROR(divide_integer(data, count, dtype, size, stream));
  return Status::OK();
}

Status wait_ready(const std::shared_ptr<transport::DeviceEvent>& ready, cudaStream_t stream) {
  if (ready == nullptr) return Status::OK();
  const auto* event = static_cast<const CudaEvent*>(ready.get());
  return cuda_status(cudaStreamWaitEvent(stream, event->get(), 0), "cudaStreamWaitEvent");
}

}  // namespace kolo::nccl
