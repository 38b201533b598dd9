// Shared-memory allreduce inside one node.
//
// The ranks of a node share one segment (node.h). Each rank's allreduce region
// holds a control block of three counters, each on its own cache line, and two
// slots:
//
//   region(r):  [posted | reduced | done]  [slot 0]  [slot 1]
//
// The bucket is processed in slices of one slot's worth of elements; slice g of
// the whole run uses slot g % 2 (double buffering: a fast rank fills slot 1 while
// a slow one still reads slot 0). Inside a slice the elements are cut into n
// shards, one per local rank, on 64-byte boundaries. For slice g, rank r:
//
//   1. waits until every peer's `done` >= g - 1: nobody still reads slot g % 2;
//   2. posts: copies the shards of its input that the PEERS own into its slot
//      (its own shard is not copied: nobody else needs it; a prescale is applied
//      on the way), then posted = g + 1;
//   3. reduces its own shard: waits for every peer's posted >= g + 1, then
//      combines its own input (private memory, read in place) with the peers'
//      copies of that shard (read in place from their slots), piece by piece in
//      L1, and writes each piece both into the free own-shard position of its
//      slot — the "result" — and into its output (Note [One pass over the own
//      shard] in pass.h); an element-wise stage (the output factor) is
//      applied to each piece on the way; a stage that needs the whole shard (the
//      hierarchical allreduce's inter-node step) runs on the result in the slot,
//      which is then copied to the output; reduced = g + 1;
//   4. gathers: waits for every peer's reduced >= g + 1 and copies their results
//      into its output; done = g + 1.
//
// Step 2 of slice g + 1 runs between steps 3 and 4 of slice g: Note [Pipelined
// slices].
//
// A fused bucket may come unpacked (run() over tensors): slices and shards are
// cut from the concatenation of the tensors as if they were one buffer, and the
// copies and the reduction of a shard walk the tensors it spans (Tensors below).
//
// Every shard is reduced by exactly one rank, so every rank ends with bitwise
// the same result. Counters only grow and are published with release stores and
// read with acquire loads; no call to the world is made.
//
// Memory traffic per byte of bucket and rank, n ranks: post 2(n-1)/n (read and
// write the peers' shards), reduce (n+2)/n (read the own input and n-1 peers'
// copies, write the slot and the output), gather 2(n-1)/n: (5n-2)/n bytes, 4 at
// n = 2 and 4.5 at n = 4. Every input byte is read once, every output byte
// written once, the prescale and output factor cost no pass of their own, and a
// fused bucket is read and written in place (never packed). In place needs
// nothing extra: a slice's input is read (steps 2 and 3) before its output is
// written (steps 3 and 4).
#include "transports/shm/allreduce.h"

#include <emmintrin.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "common/check.h"
#include "common/failpoint.h"
#include "reduce/fold.h"
#include "reduce/reduce.h"
#include "transports/shm/core_distance.h"
#include "transports/shm/counter.h"
#include "transports/shm/pass.h"

namespace kolo::shm {
namespace {

// The counters (ShmAllreduce::CounterIndex) are each on their own cache line of
// the control block; the in-place path's descriptions follow them
// (allreduce_in_place.cc).
constexpr size_t kCacheLine = 64;
constexpr size_t kControlBytes = 4096;  // the counters, one per cache line; slots page-aligned
constexpr int kSlots = 2;
// Acquire loads between pauses before the counter wait (wait_for_counter).
// Short: a peer that shares this core cannot arrive while we spin, and with 4
// ranks on 2 cores every extra load is latency (docs/perf, "Design measurements").
constexpr int kSpinLoads = 64;

// Note [Pipelined slices]
// ~~~~~~~~~~~~~~~~~~~~~~~
// A rank that has reduced its shard of slice g would otherwise wait for every
// peer's reduced(g) with nothing to do. run() posts slice g + 1 in that gap
// (post, reduce, then post the next, then gather), which the double-buffered
// slots allow: posting g + 1 waits only for the peers' done(g - 1). No cycle of
// waits: done(g - 1) needs reduced(g - 1), which every rank published before it
// posted g. Measurements: docs/perf, "Design measurements".

// Note [Shm slice size]
// ~~~~~~~~~~~~~~~~~~~~~
// One slot holds one slice of the bucket (all ranks' shards). Smaller slices keep
// the slot, the input and the output slice in L2 between the post, reduce and
// gather passes; larger ones pay fewer synchronisations. 512 KiB: at 2 ranks the
// whole slice, read and written three times, stays in the two cores' L2, and it
// measured best of 128 KiB, 512 KiB and 2 MiB (docs/perf, "Design measurements").
// Note [Streaming stores across distant cores]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A rank's slot is written by it and read by its peers. When the cores are close
// (sharing a last-level cache) the reader finds the lines in that cache and plain
// stores are best. When they are far apart (another core complex or socket) every
// line crosses the interconnect one at a time, and streaming stores are faster:
// the writer's lines go to memory without being read first or kept, and the
// reader streams them from memory. A VM's vCPUs can move between the two (the
// development VM does, every few seconds to minutes), so the ranks measure:
// local rank 0 times a few round trips with local rank 1 through counters in
// the node's segment (on the first bucket of at least kStreamMinBytes, then
// after every 64 such buckets or collectives' calls, or 256 MiB of them:
// core_distance.h, Note [One calibration for the node]) and publishes the
// decision, which every rank of the node follows. When
// streaming, a rank posts its peers' shards with streaming stores and its
// reduced pieces go to its slot with streaming stores and to its output with
// plain ones. Both ways give bitwise the same result.
// Buckets below kStreamMinBytes, and stages that need the whole shard (the
// hierarchical allreduce's), use plain stores. kStreamMinBytes is small (8 KiB)
// because far apart small buckets pay the line-by-line transfers most, as the
// collectives engine found too (Note [Streaming slots across distant cores] in
// collectives_choices.cc); near, the verdict keeps plain stores at every size.
// The runs behind each threshold: docs/perf/shm-calibration.md.
//
// Note [Streaming large outputs, near and far]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A bucket of kStreamOutputMinBytes and up writes the caller's outputs with
// streaming stores, whatever the cores' distance: a plain store reads each
// output line before writing it, and such outputs do not stay in cache for long
// anyway. Streaming measured faster near too, at every size from 2 MiB to 128 MiB
// (docs/perf/shm-calibration.md, "Large outputs") — for outputs that are not
// the inputs: see the next Note. An output its caller has just written is the
// exception (a streaming store to a cached line evicts it first: 4 MiB took
// 827-898 us streamed against 481-554 plain with the output poisoned before
// each call), but a training step's outputs come cold: with them plain up to
// 16 MiB the ResNet-50 step from the heap took 8 % longer (docs/perf/
// kolo-memory.md, "2026-11-29: outputs the caller hands in"), so 4 MiB stays.

// Note [Plain stores into a buffer just read]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A bucket whose every tensor is in place (output == input, as DDP's buckets
// and Horovod's in-place ops) has read each output line shortly before writing
// it: the slice's input went into the slot, or the in-place path read the
// shard it now writes. Those lines are in cache, so a plain store costs no read
// for ownership, and a streaming store would push them out to memory instead.
// So such buckets write their outputs with plain stores at every size; in the
// in-place path (allreduce_in_place.cc) each destination is judged alone, from
// that rank's description. Measured (kolo-allreduce-perf --in-place, 2 ranks,
// docs/perf/kolo-memory.md "In place"): through the slots 4 MiB 1.5 -> 1.0 ms,
// 64 MiB 24.4 -> 20.5 ms; from kolo memory 4 MiB 1.0 -> 0.3 ms, 64 MiB 14.1 ->
// 7.3-9.6 ms.

}  // namespace

// The bucket: the concatenation of its tensors, each with its own input and
// output (one tensor for a contiguous bucket).
class ShmAllreduce::Tensors {
 public:
  // `starts` is the engine's: refilled here, so no call allocates once it has grown.
  Tensors(const transport::BucketTensor* list, size_t n, size_t elem, std::vector<int64_t>* starts)
      : list_(list), elem_(elem), starts_(*starts) {
    starts->clear();
    starts->push_back(0);
    for (size_t i = 0; i < n; ++i) starts->push_back(starts->back() + list[i].count);
  }
  int64_t count() const { return starts_.back(); }
  // Whether every tensor's output is its input.
  bool in_place() const {
    for (size_t i = 0; i + 1 < starts_.size(); ++i) {
      if (list_[i].input != list_[i].output) return false;
    }
    return true;
  }

  // Calls f(input, output, at, n) for each tensor's part of elements [lo, hi) of
  // the concatenation, in order: `input` and `output` address element lo + at,
  // and the part holds n elements.
  template <typename F>
  void visit(int64_t lo, int64_t hi, F&& f) const {
    if (lo >= hi) return;
    // The last tensor starting at or before lo (empty tensors are skipped below).
    size_t i = static_cast<size_t>(std::upper_bound(starts_.begin(), starts_.end(), lo) -
                                   starts_.begin()) - 1;
    for (int64_t at = 0; lo + at < hi; ++i) {
      const int64_t pos = lo + at;
      const int64_t n = std::min(starts_[i + 1], hi) - pos;
      if (n <= 0) continue;
      const size_t skip = static_cast<size_t>(pos - starts_[i]) * elem_;
      f(static_cast<const char*>(list_[i].input) + skip, static_cast<char*>(list_[i].output) + skip,
        at, n);
      at += n;
    }
  }

 private:
  const transport::BucketTensor* list_;
  size_t elem_;
  const std::vector<int64_t>& starts_;  // [i]: tensor i's first element; back(): the count
};

// The elements of one slice and the shard boundaries inside it.
struct ShmAllreduce::Slice {
  uint64_t index = 0;  // global slice number: selects the slot and the counter values
  const Tensors* tensors = nullptr;
  int64_t first = 0;  // the slice's first element in the concatenation
  int64_t count = 0;
  DataType dtype = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  double prescale = 1.0;  // applied to every input element as it is first read
  bool in_rank_order = false;
  size_t elem = 4;

  // Shard r is [begin(r), begin(r + 1)) elements, cut on 64-byte boundaries.
  int64_t begin(int r, int n) const { return shard_begin(count, elem, r, n); }
  size_t offset(int r, int n) const { return static_cast<size_t>(begin(r, n)) * elem; }
  size_t bytes(int r, int n) const { return static_cast<size_t>(begin(r + 1, n) - begin(r, n)) * elem; }
  // f(input, output, at, n) over shard r's elements, tensor by tensor (Tensors::visit).
  template <typename F>
  void visit_shard(int r, int n, F&& f) const {
    tensors->visit(first + begin(r, n), first + begin(r + 1, n), std::forward<F>(f));
  }
};

int64_t ShmAllreduce::shard_begin(int64_t count, size_t elem, int r, int n) {
  const int64_t unit = static_cast<int64_t>(kCacheLine / elem);
  const int64_t units = (count + unit - 1) / unit;
  return std::min(count, units * r / n * unit);
}

size_t ShmAllreduce::slot_size(size_t slot_bytes) {
  return std::max<size_t>(kCacheLine, slot_bytes / kCacheLine * kCacheLine);
}

size_t ShmAllreduce::region_bytes(size_t slot_bytes) {
  return kControlBytes + kSlots * slot_size(slot_bytes);
}

Status ShmAllreduce::create(std::shared_ptr<Node> node, transport::Liveness* alive,
                            const Options& options, std::unique_ptr<ShmAllreduce>* out) {
  KOLO_RETURN_IF_ERROR(node->claim(Node::Region::kAllreduce, "the shm allreduce"));
  out->reset(new ShmAllreduce(std::move(node), alive, options));
  return Status::OK();
}

ShmAllreduce::ShmAllreduce(std::shared_ptr<Node> node, transport::Liveness* alive,
                           const Options& options)
    : node_(std::move(node)),
      slot_bytes_(slot_size(node_->options().allreduce_slot_bytes)),
      slice_bytes_(slot_bytes_),
      alive_(alive),
      store_mode_(options.store_mode),
      piece_(kPieceBytes) {
  for (int r = 0; r < node_->local_size(); ++r) bases_.push_back(node_->at(r, node_->layout().allreduce));
}

void ShmAllreduce::set_slice_bytes(size_t bytes) {
  slice_bytes_ = std::min(slot_bytes_, std::max(kCacheLine, bytes / kCacheLine * kCacheLine));
}

uint64_t* ShmAllreduce::counter(int rank, int which) const {
  return reinterpret_cast<uint64_t*>(bases_[static_cast<size_t>(rank)] + which * kCacheLine);
}

char* ShmAllreduce::slot(int rank, uint64_t slice) const {
  return bases_[static_cast<size_t>(rank)] + kControlBytes + (slice % kSlots) * slot_bytes_;
}

Status ShmAllreduce::wait_peers(int which, uint64_t target) {
  const int me = local_rank();
  for (int p = 0; p < local_size(); ++p) {
    if (p != me) KOLO_RETURN_IF_ERROR(wait_counter(counter(p, which), target, p));
  }
  return Status::OK();
}

Status ShmAllreduce::wait_counter(const uint64_t* c, uint64_t target, int who) {
  Status s = wait_for_counter(c, target, kSpinLoads, alive_);
  if (s.ok()) return s;
  return Status(s.code(), "shm: waiting for local rank " + std::to_string(who) + " (step " +
                              std::to_string(target) + "): " + s.message());
}

// Note [Streaming stores across distant cores]: forced, or the node's verdict,
// measured again when due (core_distance.h).
Status ShmAllreduce::decide_streaming(uint64_t bytes) {
  if (store_mode_ != StoreMode::kAuto) {
    streaming_ = store_mode_ == StoreMode::kStreaming;
    return Status::OK();
  }
  return node_->core_distance().far(
      bytes, [&](const uint64_t* c, uint64_t target, int who) { return wait_counter(c, target, who); },
      &streaming_);
}

// Note [One round for small buckets]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A slice waits three times (slot free, peers posted, peers reduced); for a few
// kilobytes those waits, each a cache-line round trip plus whatever skew the
// ranks have (and with more ranks than cores, a wake-up), cost more than the
// data. A bucket of at most kSmallBytes is instead one slice done in one round:
// every rank copies its whole bucket (prescaled) into its slot, waits once for
// every peer's, and reduces all n copies itself into its output, in rank order
// from the slots, so every rank performs the same operations in the same order
// and ends bitwise the same; an element-wise stage is applied on the way. The
// counters move as for a slice (posted, reduced and done = g + 1), so slices of
// either kind follow each other. n times the reduction work, nothing at this
// size. Not for a stage that needs a whole shard (the hierarchical step).
constexpr size_t kSmallBytes = size_t{4} << 10;

Status ShmAllreduce::run_small(const Tensors& tensors, DataType dtype, ReduceOp op,
                               const ShardStage& stage, double prescale, bool in_rank_order) {
  const int n = local_size();
  const int me = local_rank();
  const uint64_t g = next_slice_;
  const size_t elem = dtype_size(dtype);
  const int64_t count = tensors.count();
  if (g + 1 >= kSlots) KOLO_RETURN_IF_ERROR(wait_peers(kDone, g + 1 - kSlots));
  char* mine = slot(me, g);
  tensors.visit(0, count, [&](const char* in, char*, int64_t at, int64_t k) {
    reduce::copy_scaled(mine + static_cast<size_t>(at) * elem, in, k, dtype, prescale);
  });
  publish_counter(counter(me, kPosted), g + 1);
  KOLO_RETURN_IF_ERROR(wait_peers(kPosted, g + 1));
  Status status;
  tensors.visit(0, count, [&](const char*, char* out, int64_t at, int64_t k) {
    const size_t skip = static_cast<size_t>(at) * elem;
    if (in_rank_order) {  // Note [Deterministic reductions] (transport/transport.h)
      order_.clear();
      for (int p = 0; p < n; ++p) order_.push_back(slot(p, g) + skip);
      reduce::fold(out, order_.data(), n, k, dtype, op);
    } else {
      reduce::reduce(out, slot(0, g) + skip, slot(1, g) + skip, k, dtype, op);
      for (int p = 2; p < n; ++p) reduce::reduce(out, out, slot(p, g) + skip, k, dtype, op);
    }
    if (stage && status.ok()) status = stage.apply(out, k);
  });
  publish_counter(counter(me, kReduced), g + 1);
  publish_counter(counter(me, kDone), g + 1);  // this rank reads no slot of g any more
  next_slice_ = g + 1;
  return status;
}

// The three steps of a slice (see the top of the file); run() interleaves them
// across consecutive slices: Note [Pipelined slices].
Status ShmAllreduce::post(const Slice& s, bool stream, const Spans* spans) {
  const int n = local_size();
  const int me = local_rank();
  const uint64_t g = s.index;
  // 1. Slot reuse: every peer has finished slice g - kSlots.
  if (g + 1 >= kSlots) KOLO_RETURN_IF_ERROR(wait_peers(kDone, g + 1 - kSlots));
  // 2. Post the peers' shards, unless they read them from this rank's input
  // (Note [A described slice skips the slot] in allreduce_in_place.cc).
  char* mine = slot(me, g);
  const bool described = spans != nullptr && spans->state == Spans::kBoth;
  for (int p = 0; p < n && !described; ++p) {
    if (p == me) continue;
    char* to = mine + s.offset(p, n);
    s.visit_shard(p, n, [&](const char* in, char*, int64_t at, int64_t k) {
      put(to + static_cast<size_t>(at) * s.elem, in, k, s.dtype, s.prescale, stream,
          piece_.data());
    });
  }
  if (stream) _mm_sfence();  // streaming stores are not ordered by the release below
  if (spans != nullptr) *spans_area(me, g) = *spans;  // Note [Reading a peer's buffer in place]
  publish_counter(counter(me, kPosted), g + 1);
  failpoint("shm");
  return Status::OK();
}

// 3. Reduce the own shard from the own input and the peers' slots, into the slot
// and the output in one pass (Note [One pass over the own shard] in pass.h);
// a stage that needs the whole shard runs on the slot before the copy out.
Status ShmAllreduce::reduce_own(const Slice& s, const ShardStage& stage, bool stream,
                                bool stream_output) {
  const int n = local_size();
  const int me = local_rank();
  const uint64_t g = s.index;
  KOLO_RETURN_IF_ERROR(wait_peers(kPosted, g + 1));
  const size_t off = s.offset(me, n);
  peers_.clear();
  for (int p = 0; p < n; ++p) {
    if (p == me) continue;
    // Note [A described slice skips the slot]: such a peer's shard is in its input.
    const char* from = g == described_slice_ ? peer_in_[static_cast<size_t>(p)] : nullptr;
    peers_.push_back(from != nullptr ? from + static_cast<size_t>(s.first) * s.elem + off
                                     : slot(p, g) + off);
  }
  char* result = slot(me, g) + off;
  const bool whole = stage && !stage.per_element;
  ShardPass pass;
  pass.dtype = s.dtype;
  pass.op = s.op;
  pass.prescale = s.prescale;
  pass.stage = stage && !whole ? &stage.apply : nullptr;
  pass.stream_slot = stream;
  pass.stream_output = stream_output;
  if (s.in_rank_order) {
    order_.resize(static_cast<size_t>(n));
    pass.order = order_.data();
    pass.own_at = me;
  }
  Status status;
  s.visit_shard(me, n, [&](const char* in, char* out, int64_t at, int64_t k) {
    const size_t skip = static_cast<size_t>(at) * s.elem;
    if (status.ok()) {
      status = reduce_shard(pass, in, peers_.data(), n - 1, skip, result + skip,
                                 whole ? nullptr : out, k, piece_.data());
    }
  });
  if (stream) _mm_sfence();  // the slot's streaming stores before `reduced` below
  const int64_t shard = s.begin(me + 1, n) - s.begin(me, n);
  if (whole && shard > 0 && status.ok()) {
    status = stage.apply(result, shard);
    if (status.ok()) {
      s.visit_shard(me, n, [&](const char*, char* out, int64_t at, int64_t k) {
        std::memcpy(out, result + static_cast<size_t>(at) * s.elem, static_cast<size_t>(k) * s.elem);
      });
    }
  }
  KOLO_RETURN_IF_ERROR(status);
  publish_counter(counter(me, kReduced), g + 1);
  return Status::OK();
}

// 4. Gather the peers' results.
Status ShmAllreduce::gather(const Slice& s, bool stream_output) {
  const int n = local_size();
  const int me = local_rank();
  const uint64_t g = s.index;
  KOLO_RETURN_IF_ERROR(wait_peers(kReduced, g + 1));
  if (g == described_slice_) KOLO_RETURN_IF_ERROR(peers_broken(g));
  for (int p = 0; p < n; ++p) {
    if (p == me) continue;
    const char* theirs = slot(p, g) + s.offset(p, n);
    s.visit_shard(p, n, [&](const char*, char* out, int64_t at, int64_t k) {
      copy(out, theirs + static_cast<size_t>(at) * s.elem, static_cast<size_t>(k) * s.elem,
                stream_output);
    });
  }
  // Streaming stores into the output are ordered before the caller learns that
  // the bucket is done (the release below, and the coordinator's completion).
  if (stream_output) _mm_sfence();
  publish_counter(counter(me, kDone), g + 1);
  return Status::OK();
}

Status ShmAllreduce::run(const void* input, void* output, int64_t count, DataType dtype,
                         ReduceOp op, const ShardStage& stage, double prescale,
                         bool in_rank_order) {
  const transport::BucketTensor one{input, output, count, nullptr};
  return run_list(&one, 1, dtype, op, stage, prescale, in_rank_order);
}

Status ShmAllreduce::run(const std::vector<transport::BucketTensor>& tensors, DataType dtype,
                         ReduceOp op, const ShardStage& stage, double prescale,
                         bool in_rank_order) {
  return run_list(tensors.data(), tensors.size(), dtype, op, stage, prescale, in_rank_order);
}

Status ShmAllreduce::run_list(const transport::BucketTensor* tensors, size_t n, DataType dtype,
                              ReduceOp op, const ShardStage& stage, double prescale,
                              bool in_rank_order) {
  if (!is_valid(dtype)) return invalid_argument("shm: invalid dtype " + dtype_name(dtype));
  if (!is_elementwise(op)) {
    return invalid_argument("shm: op must be sum, min, max or product, not " + op_name(op));
  }
  for (size_t i = 0; i < n; ++i) {
    const transport::BucketTensor& t = tensors[i];
    const bool negative = t.count < 0;
    if (!negative && (t.count == 0 || (t.input != nullptr && t.output != nullptr))) continue;
    const std::string which = n > 1 ? " in tensor " + std::to_string(i) : "";
    return invalid_argument(negative ? "shm: negative count " + std::to_string(t.count) + which
                                     : "shm: null buffer" + which);
  }
  KOLO_RETURN_IF_ERROR(broken_);
  read_in_place_ = false;
  described_slice_ = kNoSlice;
  // Note [Reading a peer's buffer in place]: a bucket of large tensors only goes
  // tensor by tensor, so that each may be read in place.
  if (n > 1 && each_may_read_in_place(tensors, n, dtype, stage, prescale)) {
    for (size_t i = 0; i < n; ++i) {
      KOLO_RETURN_IF_ERROR(run_tensors(Tensors(&tensors[i], 1, dtype_size(dtype), &starts_),
                                       &tensors[i], dtype, op, stage, prescale, in_rank_order));
    }
    return Status::OK();
  }
  return run_tensors(Tensors(tensors, n, dtype_size(dtype), &starts_), n == 1 ? tensors : nullptr,
                     dtype, op, stage, prescale, in_rank_order);
}

Status ShmAllreduce::run_tensors(const Tensors& tensors, const transport::BucketTensor* one,
                                 DataType dtype, ReduceOp op, const ShardStage& stage,
                                 double prescale, bool in_rank_order) {
  const size_t elem = dtype_size(dtype);
  const int64_t count = tensors.count();
  if (local_size() == 1) {
    Status status;
    tensors.visit(0, count, [&](const char* in, char* out, int64_t, int64_t k) {
      reduce::copy_scaled(out, in, k, dtype, prescale);
      if (stage && status.ok()) status = stage.apply(out, k);
    });
    return status;
  }
  // Note [One round for small buckets]: the same choice on every rank (the same
  // bucket and stage kind).
  if (static_cast<size_t>(count) * elem <= std::min(kSmallBytes, slot_bytes_) &&
      (!stage || stage.per_element)) {
    Status status = run_small(tensors, dtype, op, stage, prescale, in_rank_order);
    if (!status.ok()) broken_ = status.with_context("shm is unusable after an earlier failure");
    return status;
  }
  // Note [Streaming stores across distant cores]. Every rank sees the same bucket
  // and stage kind, so every rank calibrates at the same runs.
  bool stream = false;
  if (static_cast<size_t>(count) * elem >= kStreamMinBytes && (!stage || stage.per_element)) {
    Status decided = decide_streaming(static_cast<uint64_t>(count) * elem);
    if (!decided.ok()) {
      broken_ = decided.with_context("shm is unusable after an earlier failure");
      return decided;
    }
    stream = streaming_;
  }
  // Note [Streaming large outputs, near and far], unless the outputs were just
  // read (Note [Plain stores into a buffer just read]).
  const bool stream_large = (!stage || stage.per_element) &&
                            static_cast<size_t>(count) * elem >= kStreamOutputMinBytes;
  const bool stream_output = stream_large && !tensors.in_place();
  streamed_last_output_ = stream_output;
  const int64_t per_slice = static_cast<int64_t>(slice_bytes_ / elem);
  const int64_t slices = (count + per_slice - 1) / per_slice;
  auto slice = [&](int64_t k) {
    Slice s;
    s.index = next_slice_ + static_cast<uint64_t>(k);
    s.tensors = &tensors;
    s.first = k * per_slice;
    s.count = std::min(per_slice, count - k * per_slice);
    s.dtype = dtype;
    s.op = op;
    s.prescale = prescale;
    s.in_rank_order = in_rank_order;
    s.elem = elem;
    return s;
  };
  // Note [Reading a peer's buffer in place]: described beside the first slice.
  const bool may = may_read_in_place(one, dtype, stage, prescale);
  Spans spans;
  if (may) spans = describe(*one, elem);
  // Note [Pipelined slices]: post k+1 between reducing k and gathering k.
  Status status = slices > 0 ? post(slice(0), stream, may ? &spans : nullptr) : Status::OK();
  bool in_place = false;
  if (may && status.ok()) status = everyone_in_place(next_slice_, &in_place);
  if (may && !in_place) described_slice_ = next_slice_;
  if (in_place) {
    status = run_in_place(next_slice_, *one, dtype, op, stage, in_rank_order, stream_large);
    if (status.ok()) {
      next_slice_ += 1;
      return status;
    }
  }
  for (int64_t k = 0; k < slices && status.ok() && !in_place; ++k) {
    const Slice s = slice(k);
    status = reduce_own(s, stage, stream, stream_output);
    if (status.ok() && k + 1 < slices) status = post(slice(k + 1), stream);
    if (status.ok()) status = gather(s, stream_output);
  }
  if (!status.ok()) {
    broken_ = status.with_context("shm is unusable after an earlier failure");
    return status;
  }
  next_slice_ += static_cast<uint64_t>(slices);
  return Status::OK();
}

}  // namespace kolo::shm
