// Transport: the collective seam. A transport reduces one bucket at a time.
//
// Contract:
// - Called only by the coordinator thread, for buckets in the same sequence order
//   on every rank; a transport never sees tensor names, queues, handles or options.
// - supports(bucket) answers the same on every rank for the same bucket: OK, or
//   Unsupported with a reason that the coordinator logs when it picks another.
// - The bucket's memory is owned by the coordinator and stays valid until the
//   returned Work completes.
// - A transport converts its native errors (MPI error strings, ncclResult_t, ...)
//   into Status at its boundary. An error fails the bucket's tensors.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "common/status.h"
#include "transport/device.h"

namespace kolo::transport {

// One tensor of a device bucket, or of a CPU bucket handed over unpacked (see
// BucketView).
struct BucketTensor {
  const void* input = nullptr;  // null with output null: a joined rank's zeros
  void* output = nullptr;
  int64_t count = 0;
  std::shared_ptr<DeviceEvent> ready;  // null: ready now
};

// One bucket, as a transport sees it: `count` elements at `input`, reduced into
// `output` on every rank (input == output: in place).
//
// For CPU buckets the coordinator has already packed the tensors, applied the
// prescale and turned AVERAGE into SUM, so a CPU transport sees op in {SUM, MIN,
// MAX, PRODUCT} and prescale == 1. The output factor (postscale, and 1/size for a
// floating AVERAGE) and an integer AVERAGE's division are the coordinator's pass
// afterwards — unless the transport says scales_output(): then it gets them in
// `postscale` (floating dtypes) and `divide` (integers; truncating toward zero)
// and applies them to each result element before it is written out, saving the
// coordinator's pass over memory. Otherwise postscale == 1 and divide == 1.
//
// A fused CPU bucket goes to a transport that says takes_tensors() unpacked: its
// tensors are listed in `tensors` in bucket order (their concatenation is the
// bucket; `count` is the total; input and output are null), ready now, each with
// input and output set (a joined rank's zeros point at the coordinator's zero
// buffer and a scratch output). The transport reads and writes the tensors in
// place, sparing the coordinator's copy into the fusion buffer and out again:
// Note [Fused buckets unpacked] in core/executor.cc.
//
// Device buckets (device.kind != kCpu) are handed over whole: `tensors` lists
// them in bucket order (input/output above are unused), op may be AVERAGE, and
// the transport applies prescale to every input element and postscale to every
// output element (AVERAGE's 1/size on top) in its own kernels. An integer
// AVERAGE truncates toward zero, as on the CPU. `device` is resolved (index set).
struct BucketView {
  const void* input = nullptr;
  void* output = nullptr;
  int64_t count = 0;
  DataType dtype = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  Device device;
  double prescale = 1.0;
  double postscale = 1.0;
  int64_t divide = 1;     // CPU buckets to a transport that scales_output() only
  uint64_t sequence = 0;  // the bucket's index in the coordinator's global order
  std::vector<BucketTensor> tensors;  // device buckets; CPU buckets to takes_tensors()

  size_t bytes() const { return static_cast<size_t>(count) * dtype_size(dtype); }
};

// The completion of an operation a transport started.
class Work {
 public:
  virtual ~Work() = default;
  // Non-blocking: true once complete (then wait() returns at once).
  virtual bool test() = 0;
  // Blocks until complete; returns the operation's status.
  virtual Status wait() = 0;
  // Device work: the event its last step records (see Note [Device streams]);
  // null for host work.
  virtual std::shared_ptr<DeviceEvent> done_event() const { return nullptr; }
};

// A Work that is already complete (synchronous transports).
class CompletedWork : public Work {
 public:
  explicit CompletedWork(Status status) : status_(std::move(status)) {}
  bool test() override { return true; }
  Status wait() override { return status_; }

 private:
  Status status_;
};

// The collectives other than allreduce, as a transport sees them. Counts are in
// elements of `dtype`; blocks are laid out contiguously in rank order (the
// displacement of rank r's block is the sum of the counts before it).
enum class CollectiveOp { kAllgather, kBroadcast, kAlltoall, kReducescatter };

const char* collective_op_name(CollectiveOp op);

struct CollectiveView {
  const void* input = nullptr;
  void* output = nullptr;
  DataType dtype = DataType::kFloat32;
  Device device;
  uint64_t sequence = 0;
  // kAllgather:     this rank sends recv_counts[rank] elements from input; output
  //                 receives recv_counts[r] elements from every rank r.
  // kBroadcast:     `count` elements of root's input land in every rank's output
  //                 (input == output on the root: in place). Input unused elsewhere.
  // kAlltoall:      send_counts[d] elements of input go to rank d; recv_counts[s]
  //                 elements arrive from rank s.
  // kReducescatter: input holds sum(recv_counts) elements; the reduction (op) of
  //                 every rank's input is computed and rank r receives the block of
  //                 recv_counts[r] elements at its displacement into output.
  std::vector<int64_t> send_counts;
  std::vector<int64_t> recv_counts;
  int64_t count = 0;
  int root = 0;
  ReduceOp op = ReduceOp::kSum;  // kReducescatter: SUM, MIN, MAX or PRODUCT
  // Device collectives: the input's ready event (null: ready now), and the scale
  // factors (kReducescatter: applied like a device bucket's; op may be AVERAGE).
  // CPU collectives get op without AVERAGE and factors of 1, as buckets do.
  std::shared_ptr<DeviceEvent> ready;
  double prescale = 1.0;
  double postscale = 1.0;
};

class Transport {
 public:
  virtual ~Transport() = default;

  // The name KOLO_TRANSPORT selects it by ("mpi", "ring", ...).
  virtual const char* name() const = 0;

  virtual Status supports(const BucketView& bucket) const = 0;

  virtual std::unique_ptr<Work> allreduce(const BucketView& bucket) = 0;

  // Host transports: whether allreduce() applies a CPU bucket's output factor and
  // integer division itself (see BucketView). Same answer on every rank.
  virtual bool scales_output() const { return false; }

  // Host transports: whether allreduce() takes a fused CPU bucket as its tensors,
  // unpacked (see BucketView). Only asked of transports that scales_output(), and
  // only for buckets without a prescale. Same answer on every rank.
  virtual bool takes_tensors() const { return false; }

  // Device transports: `wake` is to be called (from any thread) when device work
  // completes, so that the coordinator polls its Work. Host transports ignore it.
  virtual void set_completion_waker(std::function<void()> wake) {}

  // The other collectives. A transport that does not implement one answers
  // Unsupported (with the reason) from supports_collective, the same on every rank.
  virtual Status supports_collective(CollectiveOp op, const CollectiveView& view) const {
    return unsupported(std::string(name()) + " does not implement " + collective_op_name(op));
  }
  virtual std::unique_ptr<Work> collective(CollectiveOp op, const CollectiveView& view) {
    return std::make_unique<CompletedWork>(
        unsupported(std::string(name()) + " does not implement " + collective_op_name(op)));
  }
};

inline const char* collective_op_name(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::kAllgather: return "allgather";
    case CollectiveOp::kBroadcast: return "broadcast";
    case CollectiveOp::kAlltoall: return "alltoall";
    case CollectiveOp::kReducescatter: return "reducescatter";
  }
  return "unknown";
}

}  // namespace kolo::transport
