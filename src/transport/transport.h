// Transport: the collective seam. A transport reduces one bucket at a time.
//
// Contract:
// - Called only by the coordinator thread, for buckets in the same sequence order
//   on every rank; a transport never sees tensor names, queues, handles or options.
// - supports(bucket) answers the same on every rank for the same bucket: OK, or
//   Unsupported with a reason that the coordinator logs when it picks another.
//   It reads only the bucket's memory kind, dtype, count and reduction op: the
//   selector reuses its last answer while those match (Note [The last choice
//   is kept] in selector.h).
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

#include "common/collective.h"
#include "common/dtype.h"
#include "common/status.h"
#include "transport/capabilities.h"
#include "transport/device.h"

namespace kolo::transport {

class Carrier;

// The arithmetic of a reduction, decided once for every path by
// decide_reduction() (transport/reduction.h). Applied to every element in this
// order:
//   x = input * prescale              (skipped when prescale == 1)
//   r = op over the ranks' x          (op is SUM, MIN, MAX, PRODUCT or ADASUM, never
//                                      AVERAGE; ADASUM combines each tensor as a
//                                      whole, in the "adasum" transport only)
//   y = r * postscale                 (skipped when 1; a floating AVERAGE's 1/size is in it)
//   output = y / divide               (integer AVERAGE only; truncates toward zero)
// float16 and bfloat16 are scaled in float32, integers in float64 and truncated
// toward zero (reduce/reduce.h, Note [Integer scale factors]).
struct Reduction {
  ReduceOp op = ReduceOp::kSum;
  double prescale = 1.0;
  double postscale = 1.0;
  int64_t divide = 1;
  // r is folded in rank order 0..n-1 (see Note [Deterministic reductions]); only
  // transports whose capabilities say `deterministic` take such a bucket.
  bool deterministic = false;

  bool scales_input() const { return prescale != 1.0; }
  bool scales_output() const { return postscale != 1.0 || divide != 1; }
};

// Note [Deterministic reductions]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A floating SUM (so AVERAGE) or PRODUCT asked to be deterministic (the caller's
// flag or KOLO_DETERMINISTIC) is reduced as reduce::fold() does: every element is
// op(x_0, x_1, ..., x_{n-1}) left to right in rank order, float16/bfloat16 in a
// float accumulator rounded once, the factors as for any bucket. So its bits
// depend on the inputs and the world size only: not on the transport, the
// fusion layout, the slice or segment sizes or the node split. decide_reduction()
// sets Reduction::deterministic only where the order can change bits (MIN, MAX
// and integers are exact in any order, so they stay free to take any path); the
// selector then offers such a bucket only to transports that declare
// Capabilities::deterministic, and fails it with a message naming the knob where
// none does (NCCL, Adasum). The fusion planner never puts requests with and
// without the flag in one bucket (a bucket is reduced one way), so a caller's
// flag changes only its own tensors' path.

// One tensor of a bucket: `count` elements reduced from `input` into `output`
// (equal: in place). A rank that has joined contributes the executor's zeros and
// writes into the executor's scratch: a transport never sees null buffers.
struct BucketTensor {
  const void* input = nullptr;
  void* output = nullptr;
  int64_t count = 0;
  std::shared_ptr<DeviceEvent> ready;  // device tensors; null: ready now
};

// One bucket, as every transport receives it: the concatenation of `tensors` (in
// the coordinator's order; `count` is their total) is reduced on every rank with
// `reduction` — all of it: factors included. A transport whose engine reduces one
// contiguous buffer with a plain op, or cannot apply a factor, hands the bucket to
// reduce_contiguous() (transport/reduction.h), which packs into `staging`, scales
// and unpacks; no other party chooses between paths. `staging` is the
// coordinator's persistent fusion buffer for host buckets (null for device
// buckets: a device transport keeps its own); a bucket of several tensors never
// exceeds it unless it is a group, which reduce_contiguous() cuts.
struct Bucket {
  std::vector<BucketTensor> tensors;
  int64_t count = 0;
  DataType dtype = DataType::kFloat32;
  Device device;  // resolved (index set) for device buckets
  Reduction reduction;
  uint64_t sequence = 0;  // the bucket's index in the coordinator's global order
  char* staging = nullptr;
  size_t staging_bytes = 0;

  size_t bytes() const { return static_cast<size_t>(count) * dtype_size(dtype); }
};

// Sizes a transport may change between buckets (the autotuner's; see Note [What
// autotune tunes] in core/autotune.h). Every rank applies the same values before
// the same bucket; 0 leaves a size as it is.
// A transport takes the size its capabilities name (Capabilities::chunk).
struct Tuning {
  size_t slice_bytes = 0;    // Chunk::kNodeSlice (KOLO_SHM_SLICE_BYTES), up to the slot
  size_t segment_bytes = 0;  // Chunk::kMessageSegment (KOLO_RING_SEGMENT_BYTES)
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

// The collectives other than allreduce, as a transport sees them (kolo::Collective,
// one enum for every layer: common/collective.h). Counts are in elements of
// `dtype`; blocks are laid out contiguously in rank order (the displacement of
// rank r's block is the sum of the counts before it).

struct CollectiveView {
  const void* input = nullptr;
  void* output = nullptr;
  DataType dtype = DataType::kFloat32;
  Device device;
  uint64_t sequence = 0;
  // kAllgather:     this rank sends recv_counts[rank] elements from input; output
  //                 receives recv_counts[r] elements from every rank r. Input may
  //                 be this rank's own block of output (in place: a fused
  //                 allgather packs there), and a transport must allow it.
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
  // kAlltoall: the elements the whole world sends in this call (the sum of every
  // rank's send_counts), the same on every rank; -1 where the caller does not
  // know it (the executor does: the negotiation hands every rank the matrix).
  // Only the choice of transport reads it.
  int64_t alltoall_total = -1;
  // kAllgather: the output is the caller's own buffer (kolo_allgather_into), not
  // one kolo allocated for the call, so it may lie dirty in this core's cache. A
  // hint for how to write it, never a change in what is written.
  bool callers_output = false;
  // kReducescatter: applied in full by the transport, as a bucket's is (host
  // transports through scaled_reducescatter() in transport/reduction.h).
  Reduction reduction;
  std::shared_ptr<DeviceEvent> ready;  // device collectives; null: ready now
};

class Transport {
 public:
  virtual ~Transport() = default;

  // The name the selection table and KOLO_TRANSPORT know it by ("mpi", "ring",
  // ...); shown in logs and the timeline, compared only by the selector.
  virtual const char* name() const = 0;

  // What it can do (capabilities.h); the same on every rank, fixed once built.
  virtual Capabilities capabilities() const = 0;

  // Where capabilities().carries: the arithmetic that finishes an operation from
  // the parts carried with the AND exactly as this transport would (carrier.h);
  // null otherwise. Lives as long as the transport.
  virtual const Carrier* carrier() const { return nullptr; }

  virtual Status supports(const Bucket& bucket) const = 0;

  // Reduces the bucket (see Bucket). Host transports may complete before they
  // return; the coordinator waits for a host bucket's Work before it starts the
  // next bucket, and polls device Work.
  virtual std::unique_ptr<Work> allreduce(const Bucket& bucket) = 0;

  // Device transports: `wake` is to be called (from any thread) when device work
  // completes, so that the coordinator polls its Work. Host transports ignore it.
  // No call may run once the transport is destroyed: `wake` rings the control
  // plane, which is released right after the transports.
  virtual void set_completion_waker(std::function<void()> wake) {}

  // Takes the sizes it has (Tuning); the coordinator thread calls it between
  // buckets, at the same point of the sequence on every rank.
  virtual void tune(const Tuning& tuning) {}

  // The other collectives. A transport that does not implement one answers
  // Unsupported (with the reason) from supports_collective, the same on every rank.
  virtual Status supports_collective(Collective op, const CollectiveView& view) const {
    return unsupported(std::string(name()) + " does not implement " + collective_name(op));
  }
  virtual std::unique_ptr<Work> collective(Collective op, const CollectiveView& view) {
    return std::make_unique<CompletedWork>(
        unsupported(std::string(name()) + " does not implement " + collective_name(op)));
  }
};


}  // namespace kolo::transport
