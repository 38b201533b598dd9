// The Executor's collectives other than allreduce: broadcast, allgather, alltoall,
// reducescatter, and the negotiation-only ones (barrier, join). Each is one
// response and one transport call, whose Work goes through launch() like a
// bucket's (Note [One execution model]).
#include <cstring>

#include "common/check.h"
#include "core/collective_args.h"
#include "core/executor.h"
#include "transport/reduction.h"

namespace kolo::core {

using transport::CollectiveOp;
using transport::CollectiveView;
using transport::Work;

Status Executor::start_collective(TensorEntry& entry, const Response& response,
                                  std::unique_ptr<Work>* work) {
  switch (response.params.collective) {
    case Collective::kBroadcast: return start_broadcast(entry, response.params, work);
    case Collective::kAllgather: return start_allgather(entry, response, work);
    case Collective::kAlltoall: return start_alltoall(entry, response, work);
    case Collective::kReducescatter: return start_reducescatter(entry, response.params, work);
    case Collective::kGroupedAllgather: return start_grouped_allgather(entry, response, work);
    case Collective::kGroupedReducescatter:
      return start_grouped_reducescatter(entry, response.params, work);
    case Collective::kBarrier: return Status::OK();  // negotiation was the barrier
    case Collective::kJoin:
      entry.handle->last_joined = response.last_joined;
      return Status::OK();
    default: return internal_error("start_collective: not a collective");
  }
}

Status Executor::start_on_transport(CollectiveOp op, CollectiveView view,
                                    std::unique_ptr<Work>* work) {
  view.sequence = sequence_;
  transport::Transport* transport = nullptr;
  KOLO_RETURN_IF_ERROR(selector_.select_collective(op, view, &transport));
  // Note [Data rides with the AND] (negotiator.h): every part is here already.
  if (carried_ != nullptr && transport->capabilities().carries) {
    transport_name_ = "shm+and";
    run_carried(op, view);
    return Status::OK();
  }
  transport_name_ = transport->name();
  *work = transport->collective(op, view);
  return Status::OK();
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

// What every collective's view starts from: the entry's buffers and device.
CollectiveView Executor::view_of(const TensorEntry& entry) const {
  CollectiveView view;
  view.input = entry.input;
  view.output = entry.output;
  view.dtype = entry.request.params.dtype;
  view.device = entry.device;
  view.ready = entry.ready;
  return view;
}

Status Executor::start_broadcast(TensorEntry& entry, const TensorParams& params,
                                 std::unique_ptr<Work>* work) {
  if (params.count == 0) return Status::OK();
  CollectiveView view = view_of(entry);
  if (entry.device.kind == DeviceKind::kCpu) {  // host transports broadcast in place
    if (rank_ == params.root && entry.input != entry.output)
      std::memcpy(entry.output, entry.input, params.bytes());
    view.input = entry.output;
  }
  view.count = params.count;
  view.root = params.root;
  return start_on_transport(CollectiveOp::kBroadcast, view, work);
}

Status Executor::start_allgather(TensorEntry& entry, const Response& response,
                                 std::unique_ptr<Work>* work) {
  const TensorParams& p = response.params;
  CollectiveView view = view_of(entry);
  int64_t total = 0;
  view.recv_counts.reserve(response.rows_per_rank.size());
  for (int64_t rows : response.rows_per_rank) {
    view.recv_counts.push_back(rows * p.row_count);
    total += rows * p.row_count;
  }
  KOLO_CHECK_EQ(view.recv_counts[rank_], entry.request.params.count);
  KOLO_RETURN_IF_ERROR(allocate_output(entry, static_cast<size_t>(total) * dtype_size(p.dtype)));
  entry.handle->splits = response.rows_per_rank;
  view.output = entry.handle->output.data();
  if (total == 0) return Status::OK();
  return start_on_transport(CollectiveOp::kAllgather, view, work);
}

Status Executor::start_alltoall(TensorEntry& entry, const Response& response,
                                std::unique_ptr<Work>* work) {
  const TensorParams& p = entry.request.params;
  const int n = world_size_;
  KOLO_CHECK_EQ(response.rows_matrix.size(), static_cast<size_t>(n) * n);
  CollectiveView view = view_of(entry);
  std::vector<int64_t> received(n);
  int64_t total = 0;
  view.alltoall_total = 0;
  for (int64_t rows : response.rows_matrix) view.alltoall_total += rows * p.row_count;
  view.send_counts.reserve(static_cast<size_t>(n));
  view.recv_counts.reserve(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    view.send_counts.push_back(response.rows_matrix[rank_ * n + r] * p.row_count);
    received[r] = response.rows_matrix[r * n + rank_];
    view.recv_counts.push_back(received[r] * p.row_count);
    total += received[r] * p.row_count;
  }
  KOLO_RETURN_IF_ERROR(allocate_output(entry, static_cast<size_t>(total) * dtype_size(p.dtype)));
  entry.handle->splits = received;
  view.output = entry.handle->output.data();
  // Even when nothing moves on this rank the call is made: it is collective.
  return start_on_transport(CollectiveOp::kAlltoall, view, work);
}

Status Executor::start_reducescatter(TensorEntry& entry, const TensorParams& params,
                                     std::unique_ptr<Work>* work) {
  if (params.count == 0) return Status::OK();
  const int64_t rows = params.count / params.row_count;
  CollectiveView view = view_of(entry);
  view.reduction = transport::decide_reduction(params.op, params.dtype, params.prescale,
                                               params.postscale, world_size_);
  for (int r = 0; r < world_size_; ++r)
    view.recv_counts.push_back(shard_rows(rows, r, world_size_) * params.row_count);
  return start_on_transport(CollectiveOp::kReducescatter, view, work);
}

}  // namespace kolo::core
