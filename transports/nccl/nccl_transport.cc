#include "transports/nccl/nccl_transport.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "common/check.h"
#include "common/logging.h"
#include "common/wait_policy.h"
#include "transports/nccl/copy_plan.h"
#include "transports/nccl/device_kernels.h"
#include "transports/nccl/nccl_reduction.h"
#include "transports/nccl/nccl_types.h"

namespace kolo::nccl {
namespace {

using transport::BucketTensor;
using transport::Bucket;
using transport::CollectiveOp;
using transport::CollectiveView;
using transport::Work;

// The device buffer is never smaller than this, so that a joined rank's zeros and
// scaled reducescatter inputs always have room to go through it in chunks.
constexpr size_t kMinFusionBytes = size_t{1} << 20;
// Work at least this large gets a wake-up callback on the stream (see finish()).
constexpr size_t kWakeCallbackBytes = size_t{16} << 20;

// Makes `device` current for the scope and restores the caller's device after:
// record_ready and friends run on user threads, whose current device is theirs.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
    if (previous_ != device) status_ = cuda_status(cudaSetDevice(device), "cudaSetDevice");
  }
  ~DeviceGuard() {
    if (previous_ >= 0 && status_.ok()) cudaSetDevice(previous_);
  }
  const Status& status() const { return status_; }

 private:
  int previous_ = -1;
  Status status_;
};

// The completion of work queued on one device's stream. Done when its event has
// happened, or — checked while waiting — when the communicator failed.
class NcclWork : public Work {
 public:
  NcclWork(DeviceState* state, std::shared_ptr<CudaEvent> done)
      : state_(state), done_(std::move(done)) {}

  bool test() override {
    if (finished_) return true;
    const cudaError_t e = cudaEventQuery(done_->get());
    if (e == cudaSuccess) return finish(Status::OK());
    if (e != cudaErrorNotReady) return finish(cuda_status(e, "waiting for kolo's stream"));
    std::lock_guard<std::mutex> lock(state_->mu);
    if (!state_->broken.ok()) return finish(state_->broken);
    ncclResult_t async = ncclSuccess;
    if (state_->comm != nullptr && ncclCommGetAsyncError(state_->comm, &async) == ncclSuccess &&
        async != ncclSuccess && async != ncclInProgress) {
      Status failed = nccl_status(async, "the NCCL communicator failed");
      state_->broken = Status(failed.code(), failed.message() + "; kolo aborted the communicator");
      KOLO_LOG(kError) << state_->broken.message();
      ncclCommAbort(state_->comm);
      state_->comm = nullptr;
      return finish(state_->broken);
    }
    return false;
  }

  Status wait() override {
    Waiter backoff(wait_profile(WaitFor::kDeviceStream));
    while (!test()) backoff.pause();
    return status_;
  }

  std::shared_ptr<transport::DeviceEvent> done_event() const override { return done_; }

 private:
  bool finish(Status status) {
    status_ = std::move(status);
    finished_ = true;
    return true;
  }

  DeviceState* state_;
  std::shared_ptr<CudaEvent> done_;
  bool finished_ = false;
  Status status_;
};

}  // namespace

CudaEvent::~CudaEvent() {
  if (std::shared_ptr<EventPool> pool = pool_.lock()) {
    pool->give(device_, event_);
  } else {
    cudaEventDestroy(event_);
  }
}

EventPool::~EventPool() {
  for (const auto& [device, event] : free_) cudaEventDestroy(event);
}

Status EventPool::take(int device, cudaEvent_t* out) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = free_.rbegin(); it != free_.rend(); ++it) {
      if (it->first != device) continue;
      *out = it->second;
      free_.erase(std::next(it).base());
      return Status::OK();
    }
  }
  return cuda_status(cudaEventCreateWithFlags(out, cudaEventDisableTiming), "cudaEventCreate");
}

void EventPool::give(int device, cudaEvent_t event) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (free_.size() < kKeep) {
      free_.emplace_back(device, event);
      return;
    }
  }
  cudaEventDestroy(event);
}

NcclTransport::NcclTransport(transport::ControlPlane& control, size_t fusion_bytes,
                             std::shared_ptr<transport::CrossEngine> cross)
    : control_(control),
      topology_(control.topology()),
      fusion_bytes_(std::max(fusion_bytes, kMinFusionBytes)),
      cross_(std::move(cross)) {}

NcclTransport::~NcclTransport() {
  // A communicator that failed is aborted (destroying it could wait for peers).
  auto release = [](ncclComm_t comm, bool failed) {
    if (comm == nullptr) return;
    if (failed) {
      ncclCommAbort(comm);
    } else {
      ncclCommDestroy(comm);
    }
  };
  for (auto& [ordinal, state] : states_) {
    DeviceGuard guard(ordinal);
    if (state->stream) cudaStreamSynchronize(state->stream);
    release(state->local, !state->broken.ok());
    release(state->comm, !state->broken.ok());
    if (state->staging) cudaFreeHost(state->staging);
    if (state->fusion) cudaFree(state->fusion);
    if (state->stream) cudaStreamDestroy(state->stream);
  }
}

// ---- DeviceSupport ------------------------------------------------------------

Status NcclTransport::resolve(Device* device) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    return unsupported(std::string("no CUDA device is visible to this process (") +
                       (e != cudaSuccess ? cudaGetErrorString(e) : "0 devices") +
                       (visible ? std::string("; CUDA_VISIBLE_DEVICES=") + visible : "") + ")");
  }
  std::lock_guard<std::mutex> lock(mu_);
  int index = device->index;
  if (index == -1) index = pinned_ >= 0 ? pinned_ : topology_.local_rank % count;
  if (index < 0 || index >= count)
    return invalid_argument("CUDA device " + std::to_string(device->index) +
                            " does not exist: this process sees " + std::to_string(count) +
                            " device(s), ordinals 0.." + std::to_string(count - 1) +
                            " (or -1 for kolo's choice)");
  if (pinned_ >= 0 && index != pinned_)
    return invalid_argument("kolo uses one CUDA device per process: this process already uses cuda:" +
                            std::to_string(pinned_) + ", this tensor is on cuda:" +
                            std::to_string(index));
  pinned_ = index;
  device->index = index;
  return Status::OK();
}

Status NcclTransport::record_ready(const Device& device,
                                   std::shared_ptr<transport::DeviceEvent>* ready) {
  DeviceGuard guard(device.index);
  KOLO_RETURN_IF_ERROR(guard.status());
  cudaEvent_t event = nullptr;
  KOLO_RETURN_IF_ERROR(events_->take(device.index, &event));
  const auto stream = static_cast<cudaStream_t>(device.stream);
  // The serial is taken and the event recorded under one lock, so that serial
  // order is recording order on every stream.
  std::lock_guard<std::mutex> lock(record_mu_);
  auto owned = std::make_shared<CudaEvent>(event, device.index, events_, stream, ++recordings_);
  KOLO_CUDA_RETURN_IF_ERROR(cudaEventRecord(event, stream));
  *ready = std::move(owned);
  return Status::OK();
}

Status NcclTransport::stream_wait(const transport::DeviceEvent& event, void* stream) {
  const auto& e = static_cast<const CudaEvent&>(event);
  return cuda_status(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), e.get(), 0),
                     "cudaStreamWaitEvent");
}

Status NcclTransport::allocate(const Device& device, size_t bytes, std::shared_ptr<char>* out) {
  DeviceGuard guard(device.index);
  KOLO_RETURN_IF_ERROR(guard.status());
  void* p = nullptr;
  KOLO_CUDA_RETURN_IF_ERROR(cudaMalloc(&p, std::max<size_t>(bytes, 1)));
  const int ordinal = device.index;
  *out = std::shared_ptr<char>(static_cast<char*>(p), [ordinal](char* q) {
    DeviceGuard g(ordinal);
    cudaFree(q);
  });
  return Status::OK();
}

Status NcclTransport::allocate_zeros(const Device& device, size_t bytes, std::shared_ptr<char>* out) {
  KOLO_RETURN_IF_ERROR(allocate(device, bytes, out));
  DeviceState* state = nullptr;
  KOLO_RETURN_IF_ERROR(state_for(device, &state));
  DeviceGuard guard(device.index);
  KOLO_RETURN_IF_ERROR(guard.status());
  KOLO_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(out->get(), 0, bytes, state->stream));
  return Status::OK();
}

// ---- set-up -------------------------------------------------------------------

Status NcclTransport::state_for(const Device& device, DeviceState** out) {
  DeviceState* state = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto& slot = states_[device.index];
    if (!slot) {
      slot = std::make_unique<DeviceState>();
      slot->ordinal = device.index;
    }
    state = slot.get();
  }
  // The coordinator thread works on this device from now on.
  KOLO_RETURN_IF_ERROR(cuda_status(cudaSetDevice(state->ordinal), "cudaSetDevice"));
  {
    std::lock_guard<std::mutex> lock(state->mu);
    if (!state->broken.ok()) return state->broken;
  }
  if (state->comm == nullptr) {
    Status s = create_communicator(*state);
    if (!s.ok()) {
      std::lock_guard<std::mutex> lock(state->mu);
      state->broken = s;
      return s;
    }
  }
  *out = state;
  return Status::OK();
}

// Every rank makes its stream and fusion buffer, the ranks agree that all of them
// succeeded (one AND over the control plane, so that a rank that failed does not
// leave the others waiting in ncclCommInitRank forever), rank 0's unique id is
// broadcast, and every rank joins the communicator.
Status NcclTransport::create_communicator(DeviceState& state) {
  Status local;
  if (state.stream == nullptr) {
    int least = 0, greatest = 0;
    local = cuda_status(cudaDeviceGetStreamPriorityRange(&least, &greatest),
                        "cudaDeviceGetStreamPriorityRange");
    if (local.ok())
      local = cuda_status(cudaStreamCreateWithPriority(&state.stream, cudaStreamNonBlocking, greatest),
                          "cudaStreamCreateWithPriority");
  }
  if (local.ok() && state.fusion == nullptr) {
    local = cuda_status(cudaMalloc(&state.fusion, fusion_bytes_), "cudaMalloc (device fusion buffer)");
    if (local.ok()) state.fusion_bytes = fusion_bytes_;
  }
  if (local.ok() && cross_ && state.staging == nullptr)
    local = cuda_status(cudaMallocHost(&state.staging, fusion_bytes_), "cudaMallocHost (staging)");
  ncclUniqueId id;
  std::memset(&id, 0, sizeof(id));
  if (local.ok() && topology_.rank == 0) local = nccl_status(ncclGetUniqueId(&id), "ncclGetUniqueId");

  std::vector<uint64_t> all_ok{local.ok() ? ~uint64_t{0} : 0};
  KOLO_RETURN_IF_ERROR(control_.bitwise_and(&all_ok));
  transport::Bytes blob(reinterpret_cast<const char*>(&id), sizeof(id));
  KOLO_RETURN_IF_ERROR(control_.broadcast(&blob, 0));
  if (!local.ok()) return local.with_context("setting up NCCL on cuda:" + std::to_string(state.ordinal));
  if (all_ok[0] == 0)
    return Status(Code::kTransport, "setting up NCCL failed on another rank (see its error)");
  if (blob.size() != sizeof(id)) return internal_error("the NCCL unique id arrived truncated");
  std::memcpy(&id, blob.data(), sizeof(id));
  KOLO_NCCL_RETURN_IF_ERROR(ncclCommInitRank(&state.comm, topology_.size, id, topology_.rank));
  if (cross_) {  // the node's ranks: color = node, key = local rank (collective)
    KOLO_NCCL_RETURN_IF_ERROR(
        ncclCommSplit(state.comm, topology_.cross_rank, topology_.local_rank, &state.local, nullptr));
  }
  KOLO_LOG(kDebug) << "NCCL communicator on cuda:" << state.ordinal << " rank " << topology_.rank
                   << " of " << topology_.size;
  return Status::OK();
}

std::unique_ptr<Work> NcclTransport::finish(DeviceState* state, Status queued, size_t bytes) {
  if (!queued.ok()) return std::make_unique<transport::CompletedWork>(std::move(queued));
  cudaEvent_t event = nullptr;
  Status s = events_->take(state->ordinal, &event);
  if (!s.ok()) return std::make_unique<transport::CompletedWork>(s);
  auto done = std::make_shared<CudaEvent>(event, state->ordinal, events_);
  s = cuda_status(cudaEventRecord(event, state->stream), "cudaEventRecord");
  if (!s.ok()) return std::make_unique<transport::CompletedWork>(s);
  // The coordinator polls in-flight work for a while before it sleeps, so a host
  // callback (which also holds up the stream's next work until it has run) only
  // pays for buckets large enough to outlast that; a late small one is still
  // seen within the coordinator's capped sleep.
  if (wake_ && bytes >= kWakeCallbackBytes) cudaLaunchHostFunc(state->stream, &NcclTransport::on_done, this);
  return std::make_unique<NcclWork>(state, std::move(done));
}

void CUDART_CB NcclTransport::on_done(void* self) {
  auto* t = static_cast<NcclTransport*>(self);
  if (t->wake_) t->wake_();
}

// ---- allreduce ----------------------------------------------------------------

Status NcclTransport::supports(const Bucket& bucket) const {
  if (bucket.device.kind != DeviceKind::kCuda) return unsupported("nccl reduces CUDA memory only");
  NcclOp unused;
  return to_nccl(bucket.dtype, bucket.reduction.op, &unused);
}

std::unique_ptr<Work> NcclTransport::allreduce(const Bucket& bucket) {
  DeviceState* state = nullptr;
  Status s = state_for(bucket.device, &state);
  if (s.ok()) s = enqueue_allreduce(*state, bucket);
  if (!s.ok()) return std::make_unique<transport::CompletedWork>(s);
  return finish(state, Status::OK(), bucket.bytes());
}

// Tensors are taken in order; consecutive ones that fit the fusion buffer together
// are packed, reduced once and unpacked; one that does not fit, or a bucket of
// one tensor, is reduced in place in the caller's memory.
Status NcclTransport::enqueue_allreduce(DeviceState& state, const Bucket& bucket) {
  // Wait for the latest ready event of each producer stream: it implies the rest.
  // (cudaStreamPerThread names a different stream in each thread: no shortcut.)
  std::map<cudaStream_t, const CudaEvent*> latest;
  for (const BucketTensor& t : bucket.tensors) {
    if (t.ready == nullptr) continue;
    const auto* e = static_cast<const CudaEvent*>(t.ready.get());
    if (e->stream() == cudaStreamPerThread) {
      KOLO_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(state.stream, e->get(), 0));
      continue;
    }
    const CudaEvent*& slot = latest[e->stream()];
    if (slot == nullptr || e->serial() > slot->serial()) slot = e;
  }
  for (const auto& [stream, event] : latest)
    KOLO_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(state.stream, event->get(), 0));
  const size_t elem = dtype_size(bucket.dtype);
  const size_t n = bucket.tensors.size();
  size_t i = 0;
  while (i < n) {
    const BucketTensor& t = bucket.tensors[i];
    if (n == 1 || static_cast<size_t>(t.count) * elem > state.fusion_bytes) {
      KOLO_RETURN_IF_ERROR(enqueue_alone(state, bucket, t));
      ++i;
      continue;
    }
    size_t j = i, used = 0;
    while (j < n && used + static_cast<size_t>(bucket.tensors[j].count) * elem <= state.fusion_bytes)
      used += static_cast<size_t>(bucket.tensors[j++].count) * elem;
    KOLO_RETURN_IF_ERROR(enqueue_chunk(state, bucket, i, j));
    i = j;
  }
  return Status::OK();
}

Status NcclTransport::enqueue_chunk(DeviceState& state, const Bucket& bucket, size_t first,
                                    size_t last) {
  const transport::Reduction& r = bucket.reduction;
  const size_t elem = dtype_size(bucket.dtype);
  std::vector<CopySegment> in, out;
  int64_t total = 0;
  for (size_t k = first; k < last; ++k) {
    const BucketTensor& t = bucket.tensors[k];
    char* slot = state.fusion + static_cast<size_t>(total) * elem;
    in.push_back(CopySegment{t.input, slot, t.count});
    out.push_back(CopySegment{slot, t.output, t.count});
    total += t.count;
  }
  if (total == 0) return Status::OK();
  KOLO_RETURN_IF_ERROR(batched_copy(in, bucket.dtype, r.prescale, state.stream));
  KOLO_RETURN_IF_ERROR(reduce_in_place(state, state.fusion, total, bucket.dtype, r.op));
  if (r.divide != 1)
    KOLO_RETURN_IF_ERROR(divide_integer(state.fusion, total, bucket.dtype, static_cast<int>(r.divide), state.stream));
  const double factor = is_floating(bucket.dtype) ? r.postscale : 1.0;
  return batched_copy(out, bucket.dtype, factor, state.stream);
}

Status NcclTransport::enqueue_alone(DeviceState& state, const Bucket& bucket,
                                    const BucketTensor& t) {
  const transport::Reduction& r = bucket.reduction;
  const size_t elem = dtype_size(bucket.dtype);
  if (t.count == 0) return Status::OK();
  const void* input = t.input;
  if (r.scales_input()) {
    KOLO_RETURN_IF_ERROR(scale(t.output, t.input, t.count, bucket.dtype, r.prescale, state.stream));
    input = t.output;
  }
  if (cross_) {  // hierarchical works in place
    if (input != t.output)
      KOLO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(t.output, input, static_cast<size_t>(t.count) * elem,
                                                cudaMemcpyDeviceToDevice, state.stream));
    KOLO_RETURN_IF_ERROR(reduce_in_place(state, t.output, t.count, bucket.dtype, r.op));
    return finish_in_place(r, t.output, t.count, bucket.dtype, state.stream);
  }
  NcclOp nccl;
  KOLO_RETURN_IF_ERROR(to_nccl(bucket.dtype, r.op, &nccl));
  KOLO_NCCL_RETURN_IF_ERROR(ncclAllReduce(input, t.output, static_cast<size_t>(t.count), nccl.dtype,
                                          nccl.op, state.comm, state.stream));
  return finish_in_place(r, t.output, t.count, bucket.dtype, state.stream);
}

Status NcclTransport::reduce_in_place(DeviceState& state, void* data, int64_t count, DataType dtype,
                                      ReduceOp op) {
  if (count == 0) return Status::OK();
  if (cross_) return hierarchical_in_place(state, static_cast<char*>(data), count, dtype, op);
  NcclOp r;
  KOLO_RETURN_IF_ERROR(to_nccl(dtype, op, &r));
  return nccl_status(ncclAllReduce(data, data, static_cast<size_t>(count), r.dtype, r.op, state.comm,
                                   state.stream), "ncclAllReduce");
}

// See Note [Hierarchical on GPUs]. Chunks of at most the staging buffer's size.
Status NcclTransport::hierarchical_in_place(DeviceState& state, char* data, int64_t count,
                                            DataType dtype, ReduceOp op) {
  NcclOp r;
  KOLO_RETURN_IF_ERROR(to_nccl(dtype, op, &r));
  const size_t elem = dtype_size(dtype);
  const int n = topology_.local_size, me = topology_.local_rank;
  const int64_t most = static_cast<int64_t>(fusion_bytes_ / elem);
  for (int64_t done = 0; done < count; done += most) {
    const int64_t c = std::min(most, count - done);
    char* p = data + static_cast<size_t>(done) * elem;
    const int64_t per = c / n;
    if (per > 0) {
      const size_t shard_bytes = static_cast<size_t>(per) * elem;
      char* shard = p + static_cast<size_t>(me) * shard_bytes;
      KOLO_NCCL_RETURN_IF_ERROR(ncclReduceScatter(p, shard, static_cast<size_t>(per), r.dtype, r.op,
                                                  state.local, state.stream));
      KOLO_CUDA_RETURN_IF_ERROR(
          cudaMemcpyAsync(state.staging, shard, shard_bytes, cudaMemcpyDeviceToHost, state.stream));
      KOLO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(state.stream));
      KOLO_RETURN_IF_ERROR(cross_->allreduce(state.staging, per, dtype, op));
      KOLO_CUDA_RETURN_IF_ERROR(
          cudaMemcpyAsync(shard, state.staging, shard_bytes, cudaMemcpyHostToDevice, state.stream));
      KOLO_NCCL_RETURN_IF_ERROR(
          ncclAllGather(shard, p, static_cast<size_t>(per), r.dtype, state.local, state.stream));
    }
    const int64_t tail = c - per * n;  // fewer than local_size elements: flat
    if (tail > 0) {
      char* t = p + static_cast<size_t>(per * n) * elem;
      KOLO_NCCL_RETURN_IF_ERROR(ncclAllReduce(t, t, static_cast<size_t>(tail), r.dtype, r.op, state.comm,
                                              state.stream));
    }
  }
  return Status::OK();
}

}  // namespace kolo::nccl
