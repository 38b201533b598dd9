// The intra-node shared-memory allreduce (ShmAllreduce) and the "shm" transport.
//
// Contract (see transport/transport.h): called by the coordinator thread only, for
// buckets in the same order on every rank of the node; CPU memory; every dtype;
// ops SUM, MIN, MAX, PRODUCT. The algorithm is explained at the top of
// shm_transport.cc. After create() no MPI call happens on the hot path: ranks
// synchronise through counters in the shared window.
//
// Errors: a misuse (bad op, null buffer) returns a Status before the window is
// touched, on every rank alike, since every rank sees the same bucket. A peer
// that has failed (the Liveness given to create() says so) fails the call; the engine is then
// broken (its counters no longer agree with its peers') and fails every later
// call. Waiting never busy-spins for long: a short spin, then yields, then sleeps.
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "common/status.h"
#include "transport/transport.h"
#include "transports/mpi/core_distance.h"
#include "transports/mpi/shm_window.h"

namespace kolo::mpi {

class ShmCollectives;

// ShmAllreduce::ShardStage (below).
struct ShmShardStage {
  std::function<Status(void* shard, int64_t count)> apply;
  // Element by element (an output factor): may be applied to parts of a shard.
  bool per_element = false;
  explicit operator bool() const { return static_cast<bool>(apply); }
};

class ShmAllreduce {
 public:
  // Bytes of one slot: the unit of slicing. See Note [Shm slice size].
  static constexpr size_t kDefaultSlotBytes = size_t{512} << 10;

  // Buckets from this size up may be written to the slots with streaming stores
  // (Note [Streaming stores across distant cores]).
  static constexpr size_t kStreamMinBytes = size_t{8} << 10;
  // Buckets from this size up write the caller's outputs with streaming stores,
  // near or far (Note [Streaming large outputs, near and far]).
  static constexpr size_t kStreamOutputMinBytes = size_t{4} << 20;

  // Applied by each rank to its reduced shard of every slice, in place, before
  // the other ranks of the node copy it. The hierarchical allreduce passes the
  // inter-node allreduce here. Ranks with equal local rank on every node see the
  // same sequence of shard counts (they depend only on count, dtype, local size).
  using ShardStage = ShmShardStage;

  // How a rank writes what its peers read (Note [Streaming stores across distant
  // cores]): decided by measurement (kAuto, the default), or fixed (tests).
  enum class StoreMode { kAuto, kCached, kStreaming };

  // Collective over `local` (the node communicator): allocates and pre-faults
  // the shared window (a control block and two slots of slot_bytes per rank).
  // Every wait consults `alive` (may be null; outlives the engine).
  static Status create(MPI_Comm local, size_t slot_bytes, Liveness* alive,
                       std::unique_ptr<ShmAllreduce>* out);

  // Slices of `bytes` (rounded down to a cache line, at most the slot the window
  // was created with) from the next run() on; the same on every rank of the node.
  // The slots do not move: a smaller slice uses the front of each.
  void set_slice_bytes(size_t bytes);
  size_t slice_bytes() const { return slice_bytes_; }

  // The same on every rank of the node, before the next run().
  void set_store_mode(StoreMode mode) { store_mode_ = mode; }
  // Whether the last run() that could stream did (for tests and logs).
  bool streaming() const { return streaming_; }
  // Whether the last bucket through the slices wrote its outputs with streaming
  // stores (Note [Streaming large outputs, near and far]; tests).
  bool streamed_last_output() const { return streamed_last_output_; }

  // Allreduce of `count` elements from `input` into `output` (may be equal) over
  // the ranks of the node, each input element multiplied by `prescale` first
  // (reduce::copy_scaled's rounding; 1: untouched). Any count, including 0.
  Status run(const void* input, void* output, int64_t count, DataType dtype, ReduceOp op,
             const ShardStage& stage = {}, double prescale = 1.0);
  // The same over the concatenation of `tensors` (each reduced from its input into
  // its output, which may be equal), without packing them: slices and shards are
  // cut from the concatenation and may span tensors. Every rank passes the same
  // counts. The tensors' `ready` is ignored (CPU memory).
  Status run(const std::vector<transport::BucketTensor>& tensors, DataType dtype, ReduceOp op,
             const ShardStage& stage = {}, double prescale = 1.0);

  int local_rank() const { return window_->local_rank(); }
  int local_size() const { return window_->local_size(); }

 private:
  struct Slice;
  class Tensors;
  ShmAllreduce(std::unique_ptr<ShmWindow> window, size_t slot_bytes, Liveness* alive);

  Status run_list(const transport::BucketTensor* tensors, size_t n, DataType dtype, ReduceOp op,
                  const ShardStage& stage, double prescale);
  Status run_tensors(const Tensors& tensors, DataType dtype, ReduceOp op, const ShardStage& stage,
                     double prescale);
  // Note [One round for small buckets] (shm_transport.cc).
  Status run_small(const Tensors& tensors, DataType dtype, ReduceOp op, const ShardStage& stage,
                   double prescale);
  Status post(const Slice& slice, bool stream);
  // `stream`: the slots, `stream_output`: the outputs are written with streaming
  // stores (Note [Streaming stores across distant cores]).
  Status reduce_own(const Slice& slice, const ShardStage& stage, bool stream, bool stream_output);
  Status gather(const Slice& slice, bool stream_output);
  // Measures the round trip between local ranks 0 and 1 and agrees on streaming_.
  Status calibrate();
  // Waits until counter `which` of every other rank is at least `target`.
  Status wait_peers(int which, uint64_t target);
  // Waits until `*c` (local rank `who`'s) is at least `target`.
  Status wait_counter(const uint64_t* c, uint64_t target, int who);
  uint64_t* counter(int rank, int which) const;
  char* slot(int rank, uint64_t slice) const;

  std::unique_ptr<ShmWindow> window_;
  size_t slot_bytes_;   // each slot's size in the window
  size_t slice_bytes_;  // the slice run() cuts, <= slot_bytes_
  Liveness* alive_;
  uint64_t next_slice_ = 0;  // slices done so far, the same on every rank
  StoreMode store_mode_ = StoreMode::kAuto;
  bool streaming_ = false;         // agreed by the last calibration
  bool streamed_last_output_ = false;
  RecalibrationClock recalibration_;  // fed the runs that could stream, the same on every rank
  uint64_t calibrations_ = 0;      // the same on every rank
  std::vector<int64_t> starts_;    // Tensors' offsets, reused by every run
  std::vector<char> piece_;        // scratch for one piece (shm_pass.h)
  std::vector<const char*> peers_; // the peers' copies of the own shard, this slice
  Status broken_;
};

// The "shm" transport: ShmAllreduce behind the Transport seam. Offered by the
// MPI world when every rank is on one node.
// The other collectives go to `collectives` (shm_collectives.h; null: none).
class ShmTransport : public transport::Transport {
 public:
  explicit ShmTransport(std::unique_ptr<ShmAllreduce> engine);
  ShmTransport(std::unique_ptr<ShmAllreduce> engine, std::unique_ptr<ShmCollectives> collectives);
  ~ShmTransport() override;

  const char* name() const override { return "shm"; }
  transport::Capabilities capabilities() const override {
    transport::Capabilities c;
    c.collectives = transport::kAllCollectives;
    c.host = true;
    c.reach = transport::Reach::kOneNode;
    c.carries = true;
    c.chunk = transport::Chunk::kNodeSlice;
    return c;
  }
  Status supports(const transport::Bucket& bucket) const override;
  std::unique_ptr<transport::Work> allreduce(const transport::Bucket& bucket) override;
  void tune(const transport::Tuning& tuning) override {
    if (tuning.slice_bytes > 0) engine_->set_slice_bytes(tuning.slice_bytes);
  }
  // In shm_collectives.cc.
  Status supports_collective(transport::CollectiveOp op,
                             const transport::CollectiveView& view) const override;
  std::unique_ptr<transport::Work> collective(transport::CollectiveOp op,
                                              const transport::CollectiveView& view) override;

 private:
  std::unique_ptr<ShmAllreduce> engine_;
  std::unique_ptr<ShmCollectives> collectives_;
};

// What shm and hierarchical accept: CPU memory.
Status shm_supports(const char* name, const transport::Bucket& bucket);

// `before` (may be empty), then the reduction's output factor or integer division
// applied to a reduced shard in place: what a node's ranks copy out is final.
// Per element when `before` is empty.
ShmAllreduce::ShardStage finish_stage(const transport::Reduction& r, DataType dtype,
                                      std::function<Status(void*, int64_t)> before);

}  // namespace kolo::mpi
