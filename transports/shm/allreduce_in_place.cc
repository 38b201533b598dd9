// The shm allreduce from the peers' buffers, in place (ShmAllreduce, allreduce.h).
//
// Note [Reading a peer's buffer in place]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Through the slots a rank copies its peers' shards into its slot, reduces its
// own shard into its slot and output, and copies its peers' results out: 4
// bytes of memory traffic per byte of bucket at 2 ranks (allreduce.cc). When
// every rank's input and output lie in memory kolo handed out (kolo_alloc:
// shared_alloc.h), a rank can map its peers' buffers and skip the slots: it
// reduces its own shard from its input and the peers' inputs and writes the
// result into its own output and every peer's, in one pass at 2 ranks (read
// 1, write 1: 2 bytes per byte of bucket; past 2 ranks the further peers'
// copies are made from the own output).
//
// Who may, and the agreement: a contiguous bucket (one tensor) of at least
// kInPlaceMinBytes, no prescale, no stage that needs a whole shard, on a node
// whose ranks can read each other (Node::single_copy()): the same on every rank
// for the same bucket. A fused bucket whose every tensor may goes tensor by
// tensor (fusion puts DDP's buckets, handed over together, in one). Such a call
// posts its first slice and puts beside it, in the control block, where its
// input and output are (Spans, or none). After the peers' posted, every rank
// reads every description; when all ranks have both buffers in kolo_alloc
// memory, all take the in-place path, else all go on through the slots (the
// first slice already posted, so the check costs no round). The descriptions
// alternate between two areas as the slots do, so a slow peer reading slice g's
// never sees g + 1's.
//
// Note [A described slice skips the slot]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A rank whose buffers are both in kolo memory posts that first slice's
// description alone, without copying its peers' shards into its slot: if every
// rank's are, nobody reads the slot; if not, the peers read those shards of
// the first slice straight from its input, mapped (it is the same bytes the
// slot would hold), and every later slice goes through the slots as before.
// Every rank knows who did from the descriptions, so all read alike. The input
// stays as it is while they read: its owner writes nothing but its own shard
// until every peer has said `reduced` for the slice. The copy it saves is half
// of the bucket at 2 ranks, up to a slot: from 8 KiB to 1 MiB the bulk of an
// in-place call's own work besides the pass itself
// (docs/perf/kolo-memory.md, "2026-11-29: the first slice's copy").
// A rank that cannot map such a peer's input marks its description broken and
// publishes its counters far ahead, as below; the peers find the mark when
// they gather that slice, and every rank fails the call.
//
// kInPlaceMinBytes is 8 KiB (it was 1 MiB, then 16 KiB): from kolo memory at 2
// ranks the in-place path beat the slots from 32 KiB on, first slice's post and
// all (in place, 32 KiB to 512 KiB: 0.78-1.13x MPI through the slots,
// 1.68-2.28x in place; out of place, 64 KiB and 256 KiB: 0.96-1.08x against
// 1.82-1.96x; ResNet-50's step 3.18-3.36x either way: docs/perf/kolo-memory.md,
// "The peers' buffers from 16 KiB"); once the first slice skipped the slot it
// beat the AND's carry at 8 KiB too (3.2-3.3 us against 3.4-3.7, Note [Kolo
// memory does not ride] in carrier.h). At 4 KiB and below a bucket is one
// round in the slots (Note [One round for small buckets]) or rides the AND.
//
// The call is then one slice numbered g. posted(g + 1) is the description;
// done(g + 1) (and reduced, which moves with it) says a rank has written its
// shard everywhere, having read its shard of every peer's input first. Nobody
// else reads or writes that part of any buffer: a rank reads only its own
// shard of each input and writes only its own shard of each output, so in
// place (input and output one buffer) each piece is read before it is
// overwritten, by the same rank. A rank returns only once every peer is done,
// since the caller may then change its buffers. Each element is reduced by one
// rank, in the order the slots use (own input first, or rank order when
// deterministic): at 2 ranks and in rank order the bits are the slots'
// path's; past 2 ranks, as with the slots' slice size, which rank reduces an
// element decides its bits, the same on every rank.
//
// A rank that cannot map a peer's memory (after single_copy(), only lack of
// address space) marks its description broken and publishes reduced and done
// far ahead, so that every peer wakes, reads the mark and fails too.
#include "transports/shm/allreduce.h"

#include <emmintrin.h>

#include <string>

#include "common/check.h"
#include "common/failpoint.h"
#include "transports/shm/counter.h"
#include "transports/shm/pass.h"

namespace kolo::shm {
namespace {

constexpr size_t kCacheLine = 64;
// In the control block, after the three counters: two description areas.
constexpr size_t kSpansOffset = 4 * kCacheLine;
constexpr size_t kSpansBytes = 2 * kCacheLine;
static_assert(sizeof(ShmAllreduce::Spans) <= kSpansBytes, "a description fits its area");
// Counters published by a rank that failed in the in-place path.
constexpr uint64_t kFailedCounter = uint64_t{1} << 62;

}  // namespace

ShmAllreduce::Spans* ShmAllreduce::spans_area(int rank, uint64_t g) const {
  return reinterpret_cast<Spans*>(bases_[static_cast<size_t>(rank)] + kSpansOffset +
                                  (g % 2) * kSpansBytes);
}

bool ShmAllreduce::may_read_in_place(const transport::BucketTensor* one, DataType dtype,
                                     const ShardStage& stage, double prescale) const {
  return one != nullptr && static_cast<size_t>(one->count) * dtype_size(dtype) >= kInPlaceMinBytes &&
         prescale == 1.0 && (!stage || stage.per_element) && node_->single_copy();
}

bool ShmAllreduce::each_may_read_in_place(const transport::BucketTensor* tensors, size_t n,
                                          DataType dtype, const ShardStage& stage,
                                          double prescale) const {
  for (size_t i = 0; i < n; ++i) {
    if (!may_read_in_place(&tensors[i], dtype, stage, prescale)) return false;
  }
  return true;
}

bool ShmAllreduce::reads_in_place(const transport::BucketTensor& one, DataType dtype,
                                  double prescale) const {
  return may_read_in_place(&one, dtype, ShardStage{}, prescale) &&
         describe(one, dtype_size(dtype)).state == Spans::kBoth;
}

ShmAllreduce::Spans ShmAllreduce::describe(const transport::BucketTensor& one, size_t elem) {
  Spans spans;
  const size_t bytes = static_cast<size_t>(one.count) * elem;
  if (find_shared(one.input, bytes, &spans.input) && find_shared(one.output, bytes, &spans.output))
    spans.state = Spans::kBoth;
  return spans;
}

Status ShmAllreduce::everyone_in_place(uint64_t g, bool* all) {
  *all = false;
  KOLO_RETURN_IF_ERROR(wait_peers(kPosted, g + 1));
  const int n = local_size();
  const int me = local_rank();
  bool every = true;
  for (int p = 0; p < n; ++p) every = every && spans_area(p, g)->state == Spans::kBoth;
  peer_in_.assign(static_cast<size_t>(n), nullptr);
  peer_out_.assign(static_cast<size_t>(n), nullptr);
  // Every peer's buffers for the in-place path; otherwise the inputs of those
  // that posted their description alone (Note [A described slice skips the slot]).
  Status mapped;
  for (int p = 0; p < n && mapped.ok(); ++p) {
    const Spans* theirs = spans_area(p, g);
    if (p == me || theirs->state != Spans::kBoth) continue;
    mapped = mappings_.map(theirs->input, &peer_in_[static_cast<size_t>(p)]);
    if (mapped.ok() && every)
      mapped = mappings_.map(theirs->output, &peer_out_[static_cast<size_t>(p)]);
  }
  if (!mapped.ok()) {
    // Note [Reading a peer's buffer in place]: the peers must not wait for us.
    spans_area(me, g)->state = Spans::kBroken;
    publish_counter(counter(me, kReduced), kFailedCounter);
    publish_counter(counter(me, kDone), kFailedCounter);
    return mapped;
  }
  *all = every;
  return Status::OK();
}

Status ShmAllreduce::peers_broken(uint64_t g) const {
  for (int p = 0; p < local_size(); ++p) {
    if (spans_area(p, g)->state == Spans::kBroken) {
      return internal_error("shm: local rank " + std::to_string(p) +
                            " could not map its peers' kolo_alloc memory");
    }
  }
  return Status::OK();
}

Status ShmAllreduce::run_in_place(uint64_t g, const transport::BucketTensor& one, DataType dtype,
                                  ReduceOp op, const ShardStage& stage, bool in_rank_order,
                                  bool stream_large) {
  const int n = local_size();
  const int me = local_rank();
  const size_t elem = dtype_size(dtype);
  auto offset = [&](int r) { return static_cast<size_t>(shard_begin(one.count, elem, r, n)) * elem; };
  const char* in = static_cast<const char*>(one.input);
  char* out = static_cast<char*>(one.output);
  read_in_place_ = true;
  // The own shard, from the own input and the peers' inputs, into the own output
  // and the first peer's in the same pass, then copied to the others' (n > 2).
  peers_.clear();
  char* first_out = nullptr;
  int first = -1;
  for (int p = 0; p < n; ++p) {
    if (p == me) continue;
    peers_.push_back(peer_in_[static_cast<size_t>(p)]);
    if (first_out == nullptr) {
      first_out = peer_out_[static_cast<size_t>(p)];
      first = p;
    }
  }
  // Note [Plain stores into a buffer just read] (allreduce.cc): a rank's output
  // shard that is its input shard, which this pass reads, is written plainly.
  auto stream_into = [&](int p) {
    const Spans* s = spans_area(p, g);
    return stream_large && !(s->input.fd == s->output.fd && s->input.offset == s->output.offset);
  };
  ShardPass pass;
  pass.dtype = dtype;
  pass.op = op;
  pass.stage = stage ? &stage.apply : nullptr;
  pass.stream_slot = stream_into(me);  // the "slot" is the own output here
  pass.stream_output = stream_into(first);
  if (in_rank_order) {
    order_.resize(static_cast<size_t>(n));
    pass.order = order_.data();
    pass.own_at = me;
  }
  const size_t mine = offset(me);
  const size_t bytes = offset(me + 1) - mine;
  KOLO_RETURN_IF_ERROR(reduce_shard(pass, in + mine, peers_.data(), n - 1, mine, out + mine,
                                    first_out + mine, static_cast<int64_t>(bytes / elem),
                                    piece_.data()));
  for (int p = 0; p < n; ++p) {
    char* theirs = peer_out_[static_cast<size_t>(p)];
    if (p != me && theirs != first_out) copy(theirs + mine, out + mine, bytes, stream_into(p));
  }
  if (stream_large) _mm_sfence();
  failpoint("shm-in-place");
  publish_counter(counter(me, kReduced), g + 1);
  publish_counter(counter(me, kDone), g + 1);
  // The caller may change its buffers once no peer reads or writes them.
  KOLO_RETURN_IF_ERROR(wait_peers(kDone, g + 1));
  return peers_broken(g);
}

}  // namespace kolo::shm
