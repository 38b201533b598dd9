// NcclTransport: device tensors through NCCL, on kolo's own CUDA stream.
//
// Contract (beyond transport.h and device.h):
// - One communicator per device this process uses (kolo has one process group:
//   the world), made on the first device bucket or collective: rank 0's
//   ncclUniqueId reaches every rank over the control plane, so the call happens in
//   the coordinator's bucket order, at the same point on every rank.
// - A process uses one CUDA device: the first one resolve() settles on (the
//   caller's ordinal, or local rank modulo the visible devices) is pinned, and a
//   later tensor on another device is refused with a message naming both.
// - Each device has a persistent fusion buffer of the fusion threshold's size and
//   a non-blocking stream of the highest priority. A bucket's work is queued on
//   that stream behind the tensors' ready events: pack (one batched copy kernel,
//   prescale fused in), ncclAllReduce, unpack (postscale and AVERAGE fused in);
//   then a done event and a host callback that wakes the coordinator. Nothing
//   here blocks the CPU on the GPU except Work::wait().
// - Errors: every CUDA and NCCL result becomes a Status at this boundary. While
//   work is in flight, ncclCommGetAsyncError is checked; on an error the
//   communicator is aborted and every Work of that device, pending or later,
//   fails with NCCL's message.
// - Hierarchical (KOLO_HIERARCHICAL_ALLREDUCE, equal node sizes; see Note
//   [Hierarchical on GPUs]): given `cross`, every allreduce is an NCCL
//   reduce-scatter inside the node, `cross` (kolo's ring over MPI between the
//   ranks of equal local rank) on each rank's shard staged through pinned host
//   memory, and an NCCL allgather inside the node.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "transport/control_plane.h"
#include "transport/device.h"
#include "transport/factory.h"
#include "transport/transport.h"

namespace kolo::nccl {

// Recycled CUDA events: creating one per tensor and per bucket would cost a
// driver call each. Any thread. Events go back when their CudaEvent goes.
class EventPool {
 public:
  static constexpr size_t kKeep = 1024;
  ~EventPool();
  // An event on the current device (`device`), recycled or new.
  Status take(int device, cudaEvent_t* out);
  void give(int device, cudaEvent_t event);

 private:
  std::mutex mu_;
  std::vector<std::pair<int, cudaEvent_t>> free_;
};

// A CUDA event on one device, returned to its pool (or destroyed, once the pool
// is gone) with the object. `stream` and `serial` (a process-wide count of
// recordings) say where and when it was recorded: of two events recorded on one
// stream, waiting for the later one suffices.
class CudaEvent : public transport::DeviceEvent {
 public:
  CudaEvent(cudaEvent_t event, int device, std::weak_ptr<EventPool> pool,
            cudaStream_t stream = nullptr, uint64_t serial = 0)
      : event_(event), device_(device), pool_(std::move(pool)), stream_(stream), serial_(serial) {}
  ~CudaEvent() override;
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;

  cudaEvent_t get() const { return event_; }
  int device() const { return device_; }
  cudaStream_t stream() const { return stream_; }
  uint64_t serial() const { return serial_; }

 private:
  cudaEvent_t event_;
  int device_;
  std::weak_ptr<EventPool> pool_;
  cudaStream_t stream_;
  uint64_t serial_;
};

// What one device needs: kolo's stream, the communicator, the fusion buffer, and
// the error that broke the communicator (then every later use fails with it).
struct DeviceState {
  int ordinal = 0;
  cudaStream_t stream = nullptr;
  ncclComm_t comm = nullptr;
  ncclComm_t local = nullptr;  // hierarchical only: this node's ranks (ncclCommSplit)
  char* staging = nullptr;     // hierarchical only: pinned host memory, fusion_bytes
  char* fusion = nullptr;
  size_t fusion_bytes = 0;
  std::mutex mu;       // guards broken (Work::test runs on the coordinator, wait anywhere)
  Status broken;       // OK until the communicator failed
};

class NcclTransport : public transport::Transport, public transport::DeviceSupport {
 public:
  // `control` outlives the transport; `fusion_bytes` is KOLO_FUSION_THRESHOLD;
  // `cross`, when set, makes every allreduce hierarchical (the registry sets it
  // for KOLO_HIERARCHICAL_ALLREDUCE=1 when nodes are of equal size).
  NcclTransport(transport::ControlPlane& control, size_t fusion_bytes,
                std::shared_ptr<transport::CrossEngine> cross = nullptr);
  ~NcclTransport() override;

  const char* name() const override { return "nccl"; }
  transport::Capabilities capabilities() const override {
    transport::Capabilities c;
    c.collectives = transport::kAllCollectives;
    c.device = true;
    return c;
  }
  Status supports(const transport::Bucket& bucket) const override;
  std::unique_ptr<transport::Work> allreduce(const transport::Bucket& bucket) override;
  Status supports_collective(Collective op,
                             const transport::CollectiveView& view) const override;
  std::unique_ptr<transport::Work> collective(Collective op,
                                              const transport::CollectiveView& view) override;
  void set_completion_waker(std::function<void()> wake) override { wake_ = std::move(wake); }

  Status resolve(Device* device) override;
  Status record_ready(const Device& device, std::shared_ptr<transport::DeviceEvent>* ready) override;
  Status stream_wait(const transport::DeviceEvent& event, void* stream) override;
  Status allocate(const Device& device, size_t bytes, std::shared_ptr<char>* out) override;
  Status allocate_zeros(const Device& device, size_t bytes, std::shared_ptr<char>* out) override;

 private:
  // The device's state, with its stream, communicator and fusion buffer made on
  // first use (collective over the control plane).
  Status state_for(const Device& device, DeviceState** out);
  Status create_communicator(DeviceState& state);
  // Queues the bucket's work on the device's stream.
  Status enqueue_allreduce(DeviceState& state, const transport::Bucket& bucket);
  Status enqueue_chunk(DeviceState& state, const transport::Bucket& bucket, size_t first,
                       size_t last);
  Status enqueue_alone(DeviceState& state, const transport::Bucket& bucket,
                       const transport::BucketTensor& t);
  // In-place allreduce of `count` elements at `data`: flat, or hierarchical.
  Status reduce_in_place(DeviceState& state, void* data, int64_t count, DataType dtype,
                         ReduceOp op);
  Status hierarchical_in_place(DeviceState& state, char* data, int64_t count, DataType dtype,
                               ReduceOp op);
  Status enqueue_collective(DeviceState& state, Collective op,
                            const transport::CollectiveView& view);
  Status enqueue_reducescatter(DeviceState& state, const transport::CollectiveView& view);
  // Records the done event (and, for work that may outlast the coordinator's
  // polling, the wake-up callback) after queued work; the Work reports `queued`
  // if it failed, else the device's outcome.
  std::unique_ptr<transport::Work> finish(DeviceState* state, Status queued, size_t bytes);

  static void CUDART_CB on_done(void* self);

  transport::ControlPlane& control_;
  const transport::Topology topology_;
  const size_t fusion_bytes_;
  const std::shared_ptr<transport::CrossEngine> cross_;
  std::function<void()> wake_;
  std::mutex mu_;  // guards pinned_ and states_' map (resolve runs on user threads)
  int pinned_ = -1;
  std::shared_ptr<EventPool> events_ = std::make_shared<EventPool>();
  std::mutex record_mu_;
  uint64_t recordings_ = 0;  // CudaEvent serials; guarded by record_mu_
  std::map<int, std::unique_ptr<DeviceState>> states_;
};

// Note [Hierarchical on GPUs]
// Across nodes the network is the bottleneck; inside a node NVLink is not. So,
// as in Horovod's NCCL_REDUCESCATTER + MPI + NCCL_ALLGATHER path, each bucket is
// reduce-scattered inside the node, each rank allreduces only its 1/local_size
// shard with its peers of equal local rank on the other nodes (kolo's ring over
// MPI, on a pinned host copy: the coordinator waits for the device there), and
// the node allgathers the shards. Elements past the last multiple of local_size
// (fewer than local_size) take a flat ncclAllReduce. With one node (or
// KOLO_TEST_NODE_SIZE pretend nodes) the same code runs with the staging step
// among fewer peers, which is how one GPU exercises it.

}  // namespace kolo::nccl
