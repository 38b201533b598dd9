// The Executor's collectives other than allreduce: broadcast, allgather, alltoall,
// reducescatter, and the negotiation-only ones (barrier, join). Each runs alone:
// one response, one transport call. A device collective is started, not waited
// for: transport_collective leaves its Work in device_work_ for execute() (Note
// [Device work in flight]); the device transport copies, scales and allocates on
// the device itself.
#include <cstring>

#include "common/check.h"
#include "core/collective_args.h"
#include "core/executor.h"
#include "reduce/reduce.h"

namespace kolo::core {

using transport::CollectiveOp;
using transport::CollectiveView;

Status Executor::run_collective(TensorEntry& entry, const Response& response) {
  switch (response.params.collective) {
    case Collective::kBroadcast: return run_broadcast(entry, response.params);
    case Collective::kAllgather: return run_allgather(entry, response);
    case Collective::kAlltoall: return run_alltoall(entry, response);
    case Collective::kReducescatter: return run_reducescatter(entry, response.params);
    case Collective::kBarrier: return Status::OK();  // negotiation was the barrier
    case Collective::kJoin:
      entry.handle->splits = response.sizes;  // {last rank to join}
      return Status::OK();
    default: return internal_error("run_collective: not a collective");
  }
}

Status Executor::transport_collective(CollectiveOp op, CollectiveView view) {
  view.sequence = sequence_;
  transport::Transport* transport = nullptr;
  KOLO_RETURN_IF_ERROR(selector_.select_collective(op, view, &transport));
  if (view.device.kind == DeviceKind::kCuda) {
    device_work_ = transport->collective(op, view);
    return Status::OK();
  }
  return transport->collective(op, view)->wait();
}

Status Executor::allocate_output(TensorEntry& entry, size_t bytes) {
  if (entry.device.kind != DeviceKind::kCuda) {
    entry.handle->output = outputs_->take(bytes);
    return Status::OK();
  }
  if (device_ == nullptr) return unsupported("CUDA tensors need the NCCL transport");
  std::shared_ptr<char> block;
  KOLO_RETURN_IF_ERROR(device_->allocate(entry.device, bytes, &block));
  entry.handle->output = OutputBuffer(std::move(block), bytes);
  return Status::OK();
}

// The device view's fields beyond the CPU one: the input's ready event.
void Executor::device_fields(const TensorEntry& entry, CollectiveView* view) {
  view->device = entry.device;
  view->ready = entry.ready;
}

Status Executor::run_broadcast(TensorEntry& entry, const TensorParams& params) {
  if (params.count == 0) return Status::OK();
  CollectiveView view;
  if (entry.device.kind == DeviceKind::kCuda) {  // the transport copies root's input
    view.input = entry.input;
  } else {
    if (rank_ == params.root && entry.input != entry.output)
      std::memcpy(entry.output, entry.input, params.bytes());
    view.input = entry.output;
  }
  view.output = entry.output;
  view.dtype = params.dtype;
  device_fields(entry, &view);
  view.count = params.count;
  view.root = params.root;
  return transport_collective(CollectiveOp::kBroadcast, view);
}

Status Executor::run_allgather(TensorEntry& entry, const Response& response) {
  const TensorParams& p = response.params;
  const size_t elem = dtype_size(p.dtype);
  CollectiveView view;
  view.input = entry.input;
  view.dtype = p.dtype;
  device_fields(entry, &view);
  int64_t total = 0;
  for (int64_t rows : response.sizes) {
    view.recv_counts.push_back(rows * p.row_count);
    total += rows * p.row_count;
  }
  KOLO_CHECK_EQ(view.recv_counts[rank_], entry.request.params.count);
  KOLO_RETURN_IF_ERROR(allocate_output(entry, static_cast<size_t>(total) * elem));
  entry.handle->splits = response.sizes;
  view.output = entry.handle->output.data();
  if (total == 0) return Status::OK();
  return transport_collective(CollectiveOp::kAllgather, view);
}

Status Executor::run_alltoall(TensorEntry& entry, const Response& response) {
  const TensorParams& p = entry.request.params;  // this rank's splits
  const int n = world_size_;
  KOLO_CHECK_EQ(response.sizes.size(), static_cast<size_t>(n) * n);
  CollectiveView view;
  view.input = entry.input;
  view.dtype = p.dtype;
  device_fields(entry, &view);
  std::vector<int64_t> received(n);
  int64_t total = 0;
  for (int r = 0; r < n; ++r) {
    view.send_counts.push_back(response.sizes[rank_ * n + r] * p.row_count);
    received[r] = response.sizes[r * n + rank_];
    view.recv_counts.push_back(received[r] * p.row_count);
    total += received[r] * p.row_count;
  }
  KOLO_RETURN_IF_ERROR(allocate_output(entry, static_cast<size_t>(total) * dtype_size(p.dtype)));
  entry.handle->splits = received;
  view.output = entry.handle->output.data();
  // Even when nothing moves on this rank the call is made: it is collective.
  return transport_collective(CollectiveOp::kAlltoall, view);
}

Status Executor::run_reducescatter(TensorEntry& entry, const TensorParams& params) {
  const int64_t rows = params.count / params.row_count;
  CollectiveView view;
  view.input = entry.input;
  view.output = entry.output;
  view.dtype = params.dtype;
  device_fields(entry, &view);
  view.op = params.op == ReduceOp::kAverage ? ReduceOp::kSum : params.op;
  for (int r = 0; r < world_size_; ++r)
    view.recv_counts.push_back(shard_rows(rows, r, world_size_) * params.row_count);
  if (params.count == 0) return Status::OK();
  if (entry.device.kind == DeviceKind::kCuda) {  // scaled and averaged on the device
    view.op = params.op;
    view.prescale = params.prescale;
    view.postscale = params.postscale;
    return transport_collective(CollectiveOp::kReducescatter, view);
  }
  if (params.prescale != 1.0) {
    if (scratch_.size() < params.bytes()) scratch_.resize(params.bytes());
    reduce::copy_scaled(scratch_.data(), entry.input, params.count, params.dtype, params.prescale);
    view.input = scratch_.data();
  }
  KOLO_RETURN_IF_ERROR(transport_collective(CollectiveOp::kReducescatter, view));
  finish_in_place(entry.output, view.recv_counts[rank_], params);
  return Status::OK();
}

}  // namespace kolo::core
