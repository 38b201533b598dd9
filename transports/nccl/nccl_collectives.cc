// The NCCL transport's collectives other than allreduce: broadcast, allgather(v),
// alltoall and reducescatter on device memory, each queued on kolo's stream after
// the input's ready event (see nccl_transport.h).
#include <algorithm>

#include "transports/nccl/nccl_reduction.h"
#include "transports/nccl/nccl_transport.h"
#include "transports/nccl/nccl_types.h"
#include "transports/nccl/device_kernels.h"

namespace kolo::nccl {

using transport::CollectiveView;
using transport::Work;

Status NcclTransport::supports_collective(Collective op, const CollectiveView& view) const {
  if (view.device.kind != DeviceKind::kCuda) return unsupported("nccl moves CUDA memory only");
  ncclDataType_t dtype;
  KOLO_RETURN_IF_ERROR_AS_IS(to_nccl_dtype(view.dtype, &dtype));
  if (op == Collective::kReducescatter) {
    NcclOp unused;
    return to_nccl(view.dtype, view.reduction.op, &unused);
  }
  return Status::OK();
}

std::unique_ptr<Work> NcclTransport::collective(Collective op, const CollectiveView& view) {
  DeviceState* state = nullptr;
  Status s = state_for(view.device, &state);
  if (s.ok()) s = wait_ready(view.ready, state->stream);
  if (s.ok()) s = enqueue_collective(*state, op, view);
  if (!s.ok()) return std::make_unique<transport::CompletedWork>(s);
  size_t elements = static_cast<size_t>(view.count);
  for (int64_t c : view.recv_counts) elements += static_cast<size_t>(c);
  return finish(state, Status::OK(), elements * dtype_size(view.dtype));
}

Status NcclTransport::enqueue_collective(DeviceState& state, Collective op,
                                         const CollectiveView& view) {
  ncclDataType_t dtype;
  KOLO_RETURN_IF_ERROR(to_nccl_dtype(view.dtype, &dtype));
  const size_t elem = dtype_size(view.dtype);
  const int size = topology_.size, rank = topology_.rank;
  switch (op) {
    case Collective::kBroadcast: {
      // The root sends from its input (in place when input == output).
      const void* send = rank == view.root ? view.input : view.output;
      KOLO_NCCL_RETURN_IF_ERROR(ncclBroadcast(send, view.output, static_cast<size_t>(view.count), dtype,
                                              view.root, state.comm, state.stream));
      return Status::OK();
    }
    case Collective::kAllgather: {
      const bool even = std::all_of(view.recv_counts.begin(), view.recv_counts.end(),
                                    [&](int64_t c) { return c == view.recv_counts[0]; });
      if (even) {
        KOLO_NCCL_RETURN_IF_ERROR(ncclAllGather(view.input, view.output, static_cast<size_t>(view.recv_counts[0]),
                                                dtype, state.comm, state.stream));
        return Status::OK();
      }
      // Uneven rows: every rank broadcasts its block into place.
      KOLO_NCCL_RETURN_IF_ERROR(ncclGroupStart());
      size_t offset = 0;
      Status s;
      for (int r = 0; r < size && s.ok(); ++r) {
        char* block = static_cast<char*>(view.output) + offset * elem;
        const void* send = r == rank ? view.input : block;
        if (view.recv_counts[r] > 0)
          s = nccl_status(ncclBroadcast(send, block, static_cast<size_t>(view.recv_counts[r]), dtype, r,
                                        state.comm, state.stream), "ncclBroadcast");
        offset += static_cast<size_t>(view.recv_counts[r]);
      }
      Status end = nccl_status(ncclGroupEnd(), "ncclGroupEnd");
      return s.ok() ? end : s;
    }
    case Collective::kAlltoall: {
      KOLO_NCCL_RETURN_IF_ERROR(ncclGroupStart());
      size_t sent = 0, received = 0;
      Status s;
      for (int peer = 0; peer < size && s.ok(); ++peer) {
        const size_t out_n = static_cast<size_t>(view.send_counts[peer]);
        const size_t in_n = static_cast<size_t>(view.recv_counts[peer]);
        if (out_n > 0)
          s = nccl_status(ncclSend(static_cast<const char*>(view.input) + sent * elem, out_n, dtype, peer,
                                   state.comm, state.stream), "ncclSend");
        if (s.ok() && in_n > 0)
          s = nccl_status(ncclRecv(static_cast<char*>(view.output) + received * elem, in_n, dtype, peer,
                                   state.comm, state.stream), "ncclRecv");
        sent += out_n;
        received += in_n;
      }
      Status end = nccl_status(ncclGroupEnd(), "ncclGroupEnd");
      return s.ok() ? end : s;
    }
    case Collective::kReducescatter: return enqueue_reducescatter(state, view);
    default:
      return internal_error(std::string("nccl ") + collective_name(op) + ": not a transport collective");
  }
}

// Prescaled input goes through the fusion buffer (or a stream-ordered temporary
// when larger); uneven blocks are reduced to each owner with grouped ncclReduce.
Status NcclTransport::enqueue_reducescatter(DeviceState& state, const CollectiveView& view) {
  const transport::Reduction& reduction = view.reduction;
  NcclOp r;
  KOLO_RETURN_IF_ERROR(to_nccl(view.dtype, reduction.op, &r));
  const size_t elem = dtype_size(view.dtype);
  int64_t total = 0;
  for (int64_t c : view.recv_counts) total += c;
  const void* input = view.input;
  void* temporary = nullptr;
  if (reduction.scales_input() && total > 0) {
    const size_t bytes = static_cast<size_t>(total) * elem;
    void* scratch = state.fusion;
    if (bytes > state.fusion_bytes) {
      KOLO_CUDA_RETURN_IF_ERROR(cudaMallocAsync(&temporary, bytes, state.stream));
      scratch = temporary;
    }
    KOLO_RETURN_IF_ERROR(scale(scratch, view.input, total, view.dtype, reduction.prescale, state.stream));
    input = scratch;
  }
  const int rank = topology_.rank;
  const bool even = std::all_of(view.recv_counts.begin(), view.recv_counts.end(),
                                [&](int64_t c) { return c == view.recv_counts[0]; });
  Status s;
  if (even) {
    s = nccl_status(ncclReduceScatter(input, view.output, static_cast<size_t>(view.recv_counts[0]), r.dtype,
                                      r.op, state.comm, state.stream), "ncclReduceScatter");
  } else {
    s = nccl_status(ncclGroupStart(), "ncclGroupStart");
    size_t offset = 0;
    for (int owner = 0; owner < topology_.size && s.ok(); ++owner) {
      const size_t n = static_cast<size_t>(view.recv_counts[owner]);
      if (n > 0)
        s = nccl_status(ncclReduce(static_cast<const char*>(input) + offset * elem, view.output, n, r.dtype,
                                   r.op, owner, state.comm, state.stream), "ncclReduce");
      offset += n;
    }
    Status end = nccl_status(ncclGroupEnd(), "ncclGroupEnd");
    if (s.ok()) s = end;
  }
  if (temporary != nullptr) cudaFreeAsync(temporary, state.stream);
  KOLO_RETURN_IF_ERROR(s);
  return finish_in_place(reduction, view.output, view.recv_counts[rank], view.dtype, state.stream);
}

}  // namespace kolo::nccl
