// ShmAllreduce: the intra-node shared-memory allreduce, on its region of the
// node's segment (node.h); the "shm" transport's allreduce (transport.h) and the
// node stage of the MPI world's "hierarchical".
//
// Contract (see transport/transport.h): called by the coordinator thread only, for
// buckets in the same order on every rank of the node; CPU memory; every dtype;
// ops SUM, MIN, MAX, PRODUCT. The algorithm is explained at the top of
// allreduce.cc. Ranks synchronise through counters in the segment; no call to
// the world is made.
//
// Errors: a misuse (bad op, null buffer) returns a Status before the segment is
// touched, on every rank alike, since every rank sees the same bucket. A peer
// that has failed (the Liveness given to create() says so) fails the call; the
// engine is then broken (its counters no longer agree with its peers') and fails
// every later call. Waiting never busy-spins for long: a short spin, then
// yields, then sleeps.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "common/status.h"
#include "transport/transport.h"
#include "transport/liveness.h"
#include "transports/shm/node.h"
#include "transports/shm/shared_alloc.h"

namespace kolo::shm {

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
  // Contiguous buckets from this size up are reduced from the peers' buffers in
  // place when every rank's lies in kolo_alloc memory (Note [Reading a peer's
  // buffer in place] in allreduce_in_place.cc says why 8 KiB).
  static constexpr size_t kInPlaceMinBytes = size_t{8} << 10;

  // Applied by each rank to its reduced shard of every slice, in place, before
  // the other ranks of the node copy it. The hierarchical allreduce passes the
  // inter-node allreduce here. Ranks with equal local rank on every node see the
  // same sequence of shard counts (they depend only on count, dtype, local size).
  using ShardStage = ShmShardStage;

  // How a rank writes what its peers read (Note [Streaming stores across distant
  // cores]): decided by the node's measurement (kAuto, the default), or fixed
  // (tests and benchmarks).
  enum class StoreMode { kAuto, kCached, kStreaming };
  struct Options {
    StoreMode store_mode = StoreMode::kAuto;
  };

  // The slot a request of `slot_bytes` gets (a whole number of cache lines), and
  // the region of each rank's part that the engine needs: a control block and
  // two such slots (Node's layout asks).
  static size_t slot_size(size_t slot_bytes);
  static size_t region_bytes(size_t slot_bytes);

  // On `node`'s allreduce region (local: Node::create zeroed it), slices of the
  // region's slot. Every wait consults `alive` (may be null; outlives the
  // engine). An error when the segment has no such region or another engine
  // uses it. `options` are the same on every rank of the node.
  static Status create(std::shared_ptr<Node> node, transport::Liveness* alive,
                       const Options& options, std::unique_ptr<ShmAllreduce>* out);

  // Slices of `bytes` (rounded down to a cache line, at most the region's slot)
  // from the next run() on; the same on every rank of the node. The slots do not
  // move: a smaller slice uses the front of each. (The autotuner's knob.)
  void set_slice_bytes(size_t bytes);
  size_t slice_bytes() const { return slice_bytes_; }
  size_t slot_bytes() const { return slot_bytes_; }

  // Whether the last run() that could stream did (for tests and logs).
  bool streaming() const { return streaming_; }
  // Whether the last run() read the peers' buffers in place (tests, logs).
  bool read_in_place() const { return read_in_place_; }
  // Whether the last bucket through the slices wrote its outputs with streaming
  // stores (Note [Streaming large outputs, near and far]; tests).
  bool streamed_last_output() const { return streamed_last_output_; }

  // Allreduce of `count` elements from `input` into `output` (may be equal) over
  // the ranks of the node, each input element multiplied by `prescale` first
  // (reduce::copy_scaled's rounding; 1: untouched). Any count, including 0.
  // `in_rank_order`: every element folded in local rank order 0..n-1 as
  // reduce::fold() does (Note [Deterministic reductions] in transport/transport.h);
  // otherwise the own input first, then the peers.
  Status run(const void* input, void* output, int64_t count, DataType dtype, ReduceOp op,
             const ShardStage& stage = {}, double prescale = 1.0, bool in_rank_order = false);
  // The same over the concatenation of `tensors` (each reduced from its input into
  // its output, which may be equal), without packing them: slices and shards are
  // cut from the concatenation and may span tensors. Every rank passes the same
  // counts. The tensors' `ready` is ignored (CPU memory).
  Status run(const std::vector<transport::BucketTensor>& tensors, DataType dtype, ReduceOp op,
             const ShardStage& stage = {}, double prescale = 1.0, bool in_rank_order = false);

  // Whether this rank would take a bucket of this one tensor to the in-place
  // path (its buffers in kolo memory, and the rest of Note [Reading a peer's
  // buffer in place]'s rule, no stage that needs a whole shard assumed); the
  // peers' buffers decide the rest. ShmCarrier asks (Note [Kolo memory does not
  // ride] in carrier.h).
  bool reads_in_place(const transport::BucketTensor& one, DataType dtype, double prescale) const;

  int local_rank() const { return node_->local_rank(); }
  int local_size() const { return node_->local_size(); }

 private:
  struct Slice;
  class Tensors;
  ShmAllreduce(std::shared_ptr<Node> node, transport::Liveness* alive, const Options& options);

  Status run_list(const transport::BucketTensor* tensors, size_t n, DataType dtype, ReduceOp op,
                  const ShardStage& stage, double prescale, bool in_rank_order);
  // `one`: the bucket's only tensor, or null when it has several.
  Status run_tensors(const Tensors& tensors, const transport::BucketTensor* one, DataType dtype,
                     ReduceOp op, const ShardStage& stage, double prescale, bool in_rank_order);
  // Note [One round for small buckets] (allreduce.cc).
  Status run_small(const Tensors& tensors, DataType dtype, ReduceOp op, const ShardStage& stage,
                   double prescale, bool in_rank_order);
  // The counters in each rank's control block (allreduce.cc).
  enum CounterIndex : int { kPosted = 0, kReduced = 1, kDone = 2 };
  // Shard r of a slice of `count` elements of `elem` bytes, over n ranks, begins
  // at this element (cut on 64-byte boundaries).
  static int64_t shard_begin(int64_t count, size_t elem, int r, int n);

 public:
  // What a rank tells its peers of its buffers (Note [Reading a peer's buffer
  // in place] in allreduce_in_place.cc).
  struct Spans {
    static constexpr uint64_t kNone = 0, kBoth = 1, kBroken = 2;
    uint64_t state = kNone;
    SharedSpan input;
    SharedSpan output;
  };

 private:
  // `spans`: also describe this rank's buffers to the peers, in the slot's area.
  Status post(const Slice& slice, bool stream, const Spans* spans = nullptr);
  // Note [Reading a peer's buffer in place]: whether a call of this one tensor
  // may take it (the same answer on every rank; `one` null for a bucket of
  // several), this rank's spans, and after slice `g` was posted whether every
  // rank's buffers are mapped here (the peers' in peer_in_/peer_out_).
  bool may_read_in_place(const transport::BucketTensor* one, DataType dtype,
                         const ShardStage& stage, double prescale) const;
  bool each_may_read_in_place(const transport::BucketTensor* tensors, size_t n, DataType dtype,
                              const ShardStage& stage, double prescale) const;
  static Spans describe(const transport::BucketTensor& one, size_t elem);
  Status everyone_in_place(uint64_t g, bool* all);
  Status peers_broken(uint64_t g) const;
  // The call, as slice `g`, from the peers' buffers; `stream_large`: outputs
  // that are not their inputs are written with streaming stores.
  Status run_in_place(uint64_t g, const transport::BucketTensor& one, DataType dtype, ReduceOp op,
                      const ShardStage& stage, bool in_rank_order, bool stream_large);
  Spans* spans_area(int rank, uint64_t g) const;
  // `stream`: the slots, `stream_output`: the outputs are written with streaming
  // stores (Note [Streaming stores across distant cores]).
  Status reduce_own(const Slice& slice, const ShardStage& stage, bool stream, bool stream_output);
  Status gather(const Slice& slice, bool stream_output);
  // Whether this call of `bytes` streams its slots: forced, or the node's verdict
  // (measured again when due: core_distance.h).
  Status decide_streaming(uint64_t bytes);
  // Waits until counter `which` of every other rank is at least `target`.
  Status wait_peers(int which, uint64_t target);
  // Waits until `*c` (local rank `who`'s) is at least `target`.
  Status wait_counter(const uint64_t* c, uint64_t target, int who);
  uint64_t* counter(int rank, int which) const;
  char* slot(int rank, uint64_t slice) const;

  std::shared_ptr<Node> node_;
  std::vector<char*> bases_;  // each local rank's region
  size_t slot_bytes_;   // each slot's size in the region
  size_t slice_bytes_;  // the slice run() cuts, <= slot_bytes_
  transport::Liveness* alive_;
  uint64_t next_slice_ = 0;  // slices done so far, the same on every rank
  const StoreMode store_mode_;
  bool streaming_ = false;         // the last call that could stream did
  bool streamed_last_output_ = false;
  std::vector<int64_t> starts_;    // Tensors' offsets, reused by every run
  std::vector<char> piece_;        // scratch for one piece (pass.h)
  std::vector<const char*> peers_; // the peers' copies of the own shard, this slice
  std::vector<const void*> order_; // a rank-order fold's inputs (pass.h's ShardPass::order)
  PeerMappings mappings_;           // the peers' kolo_alloc memory, mapped on first use
  std::vector<char*> peer_in_, peer_out_;  // this call's, by local rank (in place)
  // The slice whose peers' shards are read from the peer_in_ that are set (Note
  // [A described slice skips the slot]); kNoSlice: none.
  static constexpr uint64_t kNoSlice = ~uint64_t{0};
  uint64_t described_slice_ = kNoSlice;
  bool read_in_place_ = false;
  Status broken_;
};

}  // namespace kolo::shm
