// The shm collectives engine's measured choices (collectives.h): how a
// call's slots are written (Note [Streaming slots across distant cores]) and the
// single copy that reads the peers' buffers instead (Note [Single copy for large
// calls]). The rounds themselves are in collectives.cc.
#include <sys/types.h>
#include <xmmintrin.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "common/check.h"
#include "reduce/reduce.h"
#include "transport/reduction.h"
#include "transports/shm/collectives_call.h"
#include "transports/shm/core_distance.h"
#include "transports/shm/counter.h"
#include "transports/shm/pass.h"
#include "transports/shm/peer_read.h"

namespace kolo::shm {
namespace {

using namespace collectives_layout;  // NOLINT: the engine's own layout
using transport::CollectiveView;

}  // namespace

// Note [Streaming slots across distant cores]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The reader of a slot copies lines that the writer's core has just written.
// When the two cores share a cache that is cheap; when they are far apart
// (another core complex: a VM's vCPUs move between the two, see allreduce.cc's
// Note of the same name) every line is fetched from the writer's cache one at a
// time, and the engine moves a fraction of what it moves near. Streaming stores
// send the slot's lines to memory instead, from where the reader streams them;
// they win far and lose near. So the engine follows the node's verdict on the
// cores' distance, which the allreduce follows too (core_distance.h, Note [One
// calibration for the node]): local ranks 0 and 1 time a few round trips (on
// the first call of either engine that could stream — here, whose largest
// block is kStreamSlotMinBytes or more, counted as n times the largest block:
// the same calls on every rank, the sizes coming from the headers — then after
// every 64 such calls or 256 MiB of them) and rank 0 publishes the verdict,
// which every rank follows. The writers of such calls then stream their slots
// and fence before they post (a call's first round, written before the headers
// are read, follows this rank's own size and the last verdict). Both ways give
// the same bytes.
//
// kStreamSlotMinBytes is 2 KiB because far apart a plain slot costs most at the
// small sizes, where the reader pulls a few hundred lines that all sit in the
// writer's cache; near never streams, so the floor costs nothing there. The
// runs behind both: docs/perf/shm-calibration.md.
Status ShmCollectives::decide_slot_stores(Call& c, int64_t largest_bytes) {
  if (static_cast<size_t>(largest_bytes) < options_.stream_slot_min_bytes) return Status::OK();
  if (options_.slot_stores != SlotStores::kAuto) {
    far_ = options_.slot_stores == SlotStores::kStreaming;
  } else {
    KOLO_RETURN_IF_ERROR_AS_IS(node_->core_distance().far(
        static_cast<uint64_t>(largest_bytes) * static_cast<uint64_t>(c.n),
        [&](const uint64_t* counter, uint64_t target, int) {
          return wait_for_counter(counter, target, kSpinLoads, alive_);
        },
        &far_));
  }
  c.stream_slot = far_;
  return Status::OK();
}

// Note [Small broadcasts in pieces, near]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A call below the slot size is one round: the root copies all of it into its
// slot, then the receivers copy it out, one after the other. Between cores that
// share a cache a small broadcast gains from pieces, the receivers copying one
// while the root writes the next; far apart every extra round costs its counter
// hand-offs, and so do large pieces near. So pieces (an eighth, at least 4 KiB)
// for broadcasts up to 64 KiB, near only (the runs: docs/perf/shm-collectives.md).
// The verdict is the last calibration's (Note [Streaming slots across distant
// cores]) and the count the call's, both the same on every rank, so every rank
// cuts the call alike; it is decided before the first round is written.
//
// Note [Large broadcasts in pieces, near]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Near, a broadcast of kBroadcastLargePiecesMinBytes (512 KiB) and up is cut
// into eighths as well (up to the slot: from 8 MiB the pieces are whole slots
// either way). Through kolo, with the root's data new at every call (the perf
// tool refills it), the receiver otherwise waits for the root's whole copy
// before it starts its own; in eighths they overlap: 2 ranks, heap, MPI/kolo
// medians of 3, 512 KiB 0.99 -> 1.24, 1 MiB 0.95 -> 1.41, 2 MiB 1.05 -> 1.11, 4
// MiB 1.01 -> 1.09, and 128-256 KiB and 16 MiB unchanged
// (docs/perf/shm-collectives.md, "Large broadcasts in pieces, near"). The
// engine's own bench, which broadcasts the same hot buffer back to back, finds
// the opposite (256 KiB-1 MiB 1.4-2x slower in pieces): the copies there come
// from cache and each piece's hand-over costs more than it overlaps.
//
// Note [Large broadcasts in pieces, far]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Far apart the root streams its slot to memory and the receivers read it from
// there; a call in one round does the two one after the other, and a call of
// several 1 MiB rounds starts and ends with a whole slot's worth done alone. In
// pieces of a quarter of the call (128 to 256 KiB) the receivers read a piece
// while the root streams the next. Below 128 KiB the rounds' hand-offs cost more
// than the overlap gains, and near, quarters cost more than they gain.
// Allgather, whose ranks all write and read in every round, gains nothing far
// and is not cut; nor is alltoall. The runs: docs/perf/shm-collectives.md.
int64_t ShmCollectives::broadcast_piece(const Call& c) const {
  const size_t bytes = c.bytes(c.view->count);
  size_t per = 0;
  if (far_) {
    if (bytes <= options_.far_broadcast_pieces_above_bytes) return c.piece;
    per = std::min(std::max(bytes / 4, kFarBroadcastPieceMinBytes), kFarBroadcastPieceMaxBytes);
  } else {
    if (bytes > options_.broadcast_pieces_max_bytes &&
        bytes < options_.broadcast_large_pieces_min_bytes)
      return c.piece;
    per = std::max(bytes / kBroadcastPieces, kMinBroadcastPieceBytes);
  }
  per = std::min((per + kCacheLine - 1) / kCacheLine * kCacheLine, c.region_bytes);
  return std::max<int64_t>(1, static_cast<int64_t>(per / c.elem));
}

// Note [Single copy for large calls]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Where the node allows it (peer_read.h), a call whose largest block is at
// least Options::single_copy_min_bytes can read the peers' buffers straight into the
// output, at the addresses the headers give; reducescatter reads each peer's
// piece into a private scratch and reduces from there. Every rank decides from
// the headers, so alike; each marks done and waits for every peer's done before
// it returns, so no buffer changes while a peer still reads it. Off by default
// (kSingleCopyMinBytes is SIZE_MAX): process_vm_readv moved about half of
// memcpy's bandwidth where it was measured, and the slots won at every size
// (docs/perf/shm-collectives.md) — but those calls ran a slot round first; the
// one pass below does not. Kept for nodes where such reads run at copy speed;
// the bench's --engine=single measures it.
Status ShmCollectives::copy_direct(const Call& c) {
  const CollectiveView& v = *c.view;
  switch (c.op) {
    case Collective::kBroadcast:
      return broadcast_direct(c);
    case Collective::kReducescatter:
      return reduce_direct(c);
    case Collective::kAllgather:
      if (c.push) return allgather_direct(c);
      break;
    case Collective::kAlltoall:
      break;
    default:
      KOLO_UNREACHABLE("shm: not a transport collective (supports() turns it away)");
  }
  const bool alltoall = c.op == Collective::kAlltoall;
  for (int p = 0; p < c.n; ++p) {
    const int64_t m = v.recv_counts[p];
    char* dst = c.out + c.bytes((*c.displs_out)[p]);
    if (p == c.me) {
      const int64_t done = c.own_already(m);
      const char* src = c.in + c.bytes((alltoall ? (*c.displs_in)[c.me] : 0) + done);
      if (m > done && src != dst + c.bytes(done))
        copy(dst + c.bytes(done), src, c.bytes(m - done), c.stream);
      continue;
    }
    int64_t skip = 0;  // alltoall: where p's block for this rank starts in p's input
    for (int d = 0; alltoall && d < c.me; ++d) skip += header(p, c.first)[kFields + d];
    KOLO_RETURN_IF_ERROR_AS_IS(read_source(c, p, skip, dst, m));
  }
  return Status::OK();
}

// Note [The peers' sources in kolo memory]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// What a rank publishes for its peers to read (its input; a broadcast root's
// buffer) may lie in memory kolo handed out (shared_alloc.h). Each header then
// carries that memory's SharedSpan, and a peer maps it (PeerMappings, kept
// across calls) and reads it with memcpy, or streaming stores, at the speed of
// a copy inside one process, where process_vm_readv ran at about half of it
// (Note [Single copy for large calls]). So:
// - the single-copy paths (one pass, Options::single_copy_min_bytes) read a
//   mapped peer that way, and every other peer through read_peer;
// - a call whose largest block has at least Options::shared_direct_min_bytes
//   (8 KiB; a broadcast Options::broadcast_direct_min_bytes, 16 KiB) and whose
//   every source rank published a span (or one rank posted its header alone:
//   Note [A mapped source skips the slot]) takes the single-copy path after its
//   first round, as the allreduce decides after its first slice: every rank
//   reads the same headers, so all decide alike. An alltoall's first slot
//   pieces are then wasted; reducescatter reduces straight from the mapped
//   peers. 16 KiB, not the 1 MiB it was: from kolo memory at 2 ranks, the
//   broadcast from 32 KiB to 512 KiB went from 0.54-0.99x MPI to 1.08-1.96x,
//   the reducescatter from 32 KiB to 1 MiB from 0.94-4.89x to 1.30-7.12x, the
//   alltoall of 32 KiB (below the one pass) from 0.72-0.78x to 1.35-1.38x, and
//   the rest stayed within the runs' spread (docs/perf/kolo-memory.md, "The
//   peers' buffers from 16 KiB"). Then 8 KiB, once such calls no longer rode
//   the AND (Note [Kolo memory does not ride] in carrier.h): 8 KiB blocks
//   read mapped beat the carry (allgather and alltoall of 16 KiB, reducescatter
//   of 16 KiB), 4 KiB ones did not, nor did a broadcast of 8 KiB
//   (docs/perf/kolo-memory.md, "2026-11-29: the first slice's copy").
// A rank that cannot map a peer's span reads that peer through read_peer
// (single_copy() says it can), so a failed mapping costs speed, never the call.
bool ShmCollectives::sources_shared(const Call& c) const {
  if (c.op == Collective::kBroadcast) return header(c.view->root, c.first)[kFd] >= 0;
  for (int r = 0; r < c.n; ++r) {
    // -1: on the heap; kNoSource (nothing to read) does not stand in the way.
    if (header(r, c.first)[kFd] == -1) return false;
  }
  return true;
}

bool ShmCollectives::reads_mapped(Collective op, const CollectiveView& part, int rank) const {
  int64_t block = 0;  // the part's largest block, in elements
  int64_t source = 0;
  switch (op) {
    case Collective::kBroadcast:
      if (rank != part.root) return false;
      block = source = part.count;
      break;
    case Collective::kAllgather:
      block = source = part.count;
      break;
    case Collective::kAlltoall:
      for (int64_t count : part.send_counts) {
        block = std::max(block, count);
        source += count;
      }
      break;
    case Collective::kReducescatter:
      source = part.count;
      block = (part.count + local_size() - 1) / local_size();
      break;
    default:
      return false;
  }
  const size_t elem = dtype_size(part.dtype);
  SharedSpan span;
  return single_copy() && static_cast<size_t>(block) * elem >= direct_min_bytes(op) &&
         find_shared(part.input, static_cast<size_t>(source) * elem, &span);
}

// Note [A mapped source skips the slot]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A source that lies in kolo memory is read mapped once the call is large
// enough (Note [The peers' sources in kolo memory]), so its first slot piece
// would be copied for nobody, and its readers would wait for that copy before
// they start theirs: at 1 MiB, two copies of a broadcast in a row where one
// does. So a rank whose source is mapped posts its first round's header alone
// when the node reads single copy at all and the call's largest block, as its
// own view gives it, reaches direct_min_bytes(): a broadcast's
// count, an allgather's or reducescatter's largest recv_count (which the
// headers compare, so an agreed call has the same on every rank). Every rank
// sees from the headers which ranks did, and if any did the whole call takes
// the single-copy path, reading peers on the heap through read_peer: nobody
// reads a slot that was not written. An alltoall rank knows only its own row
// and column, so it posts as before.
int64_t ShmCollectives::largest_in_view(const Call& c) const {
  const CollectiveView& v = *c.view;
  switch (c.op) {
    case Collective::kBroadcast:
      return v.count;
    case Collective::kAllgather:
    case Collective::kReducescatter:
      return v.recv_counts.empty() ? 0 : *std::max_element(v.recv_counts.begin(), v.recv_counts.end());
    default:
      return 0;
  }
}

// Whether rank r posted its first round's header alone, for a call whose
// largest block has `largest` elements (Note [A mapped source skips the slot]).
bool ShmCollectives::posted_header_only(const Call& c, int r, int64_t largest) const {
  if (!single_copy() || c.bytes(largest) < direct_min_bytes(c.op)) return false;
  switch (c.op) {
    case Collective::kBroadcast:
      return r == c.view->root && header(r, c.first)[kFd] >= 0;
    case Collective::kAllgather:
    case Collective::kReducescatter:
      return header(r, c.first)[kFd] >= 0;
    default:
      return false;
  }
}

// Note [The root writes a share]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Read from the root in place, a broadcast costs each receiver one copy of the
// call while the root, whose buffer is its output already, waits. With the
// receivers' outputs in kolo memory the root can copy too: it maps them (their
// headers publish their outputs) and writes the call's last 1/n (from a cache
// line on) into every receiver it mapped, while each receiver copies the rest,
// so every rank copies (n-1)/n of the call. A root whose input is not its
// output copies the whole call into its output first, as much as a receiver
// copies, so it writes no share. The root's header says in its first round
// whether it will (its own word of the second row); it marks each receiver whose
// share it wrote before it posts done, and a receiver whose output it could not
// map copies the share itself once it sees that. The runs:
// docs/perf/kolo-memory.md, "A broadcast's root writes a share".
Status ShmCollectives::broadcast_direct(const Call& c) {
  const CollectiveView& v = *c.view;
  int64_t* root = header(v.root, c.first);
  int64_t* marks = root + kFields + c.n;  // the root's second row
  const int64_t per_line = std::max<int64_t>(1, static_cast<int64_t>(kCacheLine / c.elem));
  const int64_t keep =
      std::min(v.count, (v.count - v.count / c.n + per_line - 1) / per_line * per_line);
  const size_t share = c.bytes(v.count - keep);
  if (c.me == v.root) {
    if (c.bcast_src != c.out) {
      copy_bytes(c.out, c.bcast_src, c.bytes(v.count));
      return Status::OK();
    }
    for (int d = 0; d < c.n && share > 0; ++d) {
      char* theirs = peer_output_[static_cast<size_t>(d)];
      if (d == c.me || theirs == nullptr) continue;
      copy(theirs + c.bytes(keep), c.out + c.bytes(keep), share, c.stream);
      marks[d] = 1;
    }
    return Status::OK();
  }
  const bool split = marks[v.root] != 0 && header(c.me, c.first)[kOutFd] >= 0 && share > 0;
  KOLO_RETURN_IF_ERROR_AS_IS(read_source(c, v.root, 0, c.out, split ? keep : v.count));
  if (!split) return Status::OK();
  KOLO_RETURN_IF_ERROR_AS_IS(wait_peers(kDone, c.first + 1, v.root));
  if (marks[c.me] != 0) return Status::OK();
  return read_source(c, v.root, keep, c.out + c.bytes(keep), v.count - keep);
}

// A span that a peer's header publishes from `at` on (Field's order), mapped
// here; null when it does not lie in kolo memory or cannot be mapped (the
// caller then reads through read_peer, or leaves the writing to its owner).
char* ShmCollectives::map_span(const int64_t* h, const int64_t* at) {
  if (at[0] < 0) return nullptr;
  SharedSpan span;
  span.pid = h[kPid];
  span.fd = at[0];
  span.epoch = static_cast<uint64_t>(at[1]);
  span.bytes = static_cast<uint64_t>(at[2]);
  span.offset = static_cast<uint64_t>(at[3]);
  char* mapped = nullptr;
  return mappings_.map(span, &mapped).ok() ? mapped : nullptr;
}

// Note [An allgather pushes its block]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Read from the peers (the pull), each rank's block is read from memory once by
// every rank: n times in all, where the node needs it once. When the outputs
// lie in kolo memory (the headers publish them), each rank instead writes its
// own block into its output and every peer's output, a piece of kPieceBytes at
// a time, so the block comes from memory once and from L1 the other n - 1
// times; per rank, 1/n of the output read and all of it written, where the pull
// reads all of it. Every rank decides alike from the headers (single copy, the
// largest block at least Options::allgather_push_min_bytes). A rank whose
// output is on the heap pulls every block itself, and every rank pushes into
// the others. Nobody waits for a pusher before it posts done: the done that
// every rank waits for before it returns covers the pushes into its output.
// A rank that cannot map a peer's published output (after single_copy(), only
// lack of address space) writes its failure word before it posts done, and
// every rank reads the words once all are done, so every rank fails the call
// alike (checked_pushes()), as the allreduce does (Note [Reading a peer's
// buffer in place] in allreduce_in_place.cc). The runs: docs/perf/kolo-memory.md,
// "An allgather pushes its block".
Status ShmCollectives::allgather_direct(const Call& c) {
  const CollectiveView& v = *c.view;
  const int64_t m = v.recv_counts[c.me];
  const size_t block = c.bytes(m);
  const size_t at_out = c.bytes((*c.displs_out)[c.me]);
  for (int d = 0; d < c.n && block > 0; ++d) {
    if (d != c.me && header(d, c.first)[kOutFd] >= 0 && peer_output_[static_cast<size_t>(d)] == nullptr) {
      header(c.me, c.first)[kFields + c.n + c.me] = 1;  // this rank's failure word
      return internal_error("shm allgather: local rank " + std::to_string(c.me) +
                            " could not map local rank " + std::to_string(d) +
                            "'s kolo_alloc output");
    }
  }
  const size_t own_from = c.bytes(c.own_already(m));
  char* own = c.out + at_out;
  for (size_t at = 0; at < block; at += kPieceBytes) {
    const size_t len = std::min(kPieceBytes, block - at);
    if (own != c.in && at + len > own_from) {
      const size_t from = std::max(at, own_from);
      copy(own + from, c.in + from, at + len - from, c.stream);
    }
    for (int d = 0; d < c.n; ++d) {
      if (char* theirs = peer_output_[static_cast<size_t>(d)])
        copy(theirs + at_out + at, c.in + at, len, c.stream);
    }
  }
  if (header(c.me, c.first)[kOutFd] >= 0) return Status::OK();  // the peers push into it
  for (int p = 0; p < c.n; ++p) {
    if (p == c.me) continue;
    KOLO_RETURN_IF_ERROR_AS_IS(
        read_source(c, p, 0, c.out + c.bytes((*c.displs_out)[p]), v.recv_counts[p]));
  }
  return Status::OK();
}

// After every rank is done: whether one failed to push (Note [An allgather
// pushes its block]), the same answer on every rank.
Status ShmCollectives::checked_pushes(const Call& c) const {
  for (int p = 0; c.push && p < c.n; ++p) {
    if (header(p, c.first)[kFields + c.n + p] != 0) {
      return internal_error("shm allgather: local rank " + std::to_string(p) +
                            " could not write its block into a peer's kolo_alloc output");
    }
  }
  return Status::OK();
}

// The peers' buffers this call reads, and the outputs it writes (a broadcast
// root's share, an allgather's pushed blocks), mapped where they lie in kolo
// memory.
void ShmCollectives::map_sources(const Call& c) {
  peer_source_.assign(static_cast<size_t>(c.n), nullptr);
  peer_output_.assign(static_cast<size_t>(c.n), nullptr);
  const bool writes = c.push || (c.op == Collective::kBroadcast && c.me == c.view->root);
  for (int p = 0; p < c.n; ++p) {
    if (p == c.me) continue;
    const int64_t* h = header(p, c.first);
    peer_source_[static_cast<size_t>(p)] = map_span(h, h + kFd);
    if (writes) peer_output_[static_cast<size_t>(p)] = map_span(h, h + kOutFd);
  }
}

// `count` elements of peer p's source from element `at` into dst: from the
// mapping when there is one, else with read_peer.
Status ShmCollectives::read_source(const Call& c, int p, int64_t at, char* dst, int64_t count) {
  const size_t bytes = c.bytes(count);
  if (bytes == 0) return Status::OK();
  if (const char* mapped = peer_source_[static_cast<size_t>(p)]) {
    copy(dst, mapped + c.bytes(at), bytes, c.stream);
    return Status::OK();
  }
  const int64_t* h = header(p, c.first);
  const char* remote = reinterpret_cast<const char*>(static_cast<uintptr_t>(h[kAddress]));
  return read_peer(static_cast<pid_t>(h[kPid]), remote + c.bytes(at), dst, bytes);
}

// Note [One pass from the peers' inputs]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Through the slots each byte a rank sends is copied twice (by its writer into
// the slot, by its reader out of it), and an alltoall rank also copies its own
// block: three passes. Reading the peers' inputs with one copy (peer_read.h)
// leaves two: the own block, then each peer's block straight into the output.
// But a call that runs a slot round first has posted its first pieces already
// (up to a whole slot), so single copy could not win below a few slots. So
// allgathers and alltoalls whose output per rank (the average: the node's total
// over its ranks) lies in [Options::one_pass_min_bytes, one_pass_max_bytes]
// skip the slot round: the first round carries the header only, each rank
// copies its whole own block while the peers' headers arrive (Note [The own
// block while the peers catch up]), then reads the peers' blocks. The choice
// must be the same on every rank before any header is read, so it is made from
// the view alone: allgather's recv_counts, alltoall's alltoall_total (which the
// header carries as its count, so ranks that disagree fail alike); an alltoall
// without a total (-1) keeps the slots. The window, 64 KiB to 16 MiB: from
// 64 KiB one round of hand-offs beats the slot's; at 64 MiB a one-copy read,
// about half of memcpy's speed in this VM, costs more than the pass it saves
// (docs/perf/shm-collectives.md, "One pass from the peers' inputs").
bool ShmCollectives::one_pass(const Call& c, size_t out_bytes) const {
  if (!single_copy() || c.n == 1) return false;
  size_t per_rank = 0;
  if (c.op == Collective::kAllgather) {
    per_rank = out_bytes;
  } else if (c.op == Collective::kAlltoall && c.view->alltoall_total >= 0) {
    per_rank = c.bytes(c.view->alltoall_total) / static_cast<size_t>(c.n);
  } else {
    return false;
  }
  return per_rank >= options_.one_pass_min_bytes && per_rank <= options_.one_pass_max_bytes;
}

// The own block into the output, all of it (a one-pass call's first round). An
// alltoall rank whose own send and receive counts differ copies nothing (the
// headers report the mismatch; Note [The own block while the peers catch up]).
void ShmCollectives::copy_own_whole(Call& c) const {
  const CollectiveView& v = *c.view;
  const bool alltoall = c.op == Collective::kAlltoall;
  c.own_done = 0;
  if (alltoall && v.send_counts[c.me] != v.recv_counts[c.me]) return;
  const int64_t m = v.recv_counts[c.me];
  const char* src = c.in + c.bytes(alltoall ? (*c.displs_in)[c.me] : 0);
  char* dst = c.out + c.bytes((*c.displs_out)[c.me]);
  if (m > 0 && src != dst) copy(dst, src, c.bytes(m), c.stream);
  c.own_done = m;
}

// This rank's block, a scratch-sized piece at a time: its own input (prescaled
// into the output) combined with each peer's piece read into the scratch.
Status ShmCollectives::reduce_direct(const Call& c) {
  const CollectiveView& v = *c.view;
  const transport::Reduction& r = v.reduction;
  const int64_t count = v.recv_counts[c.me];
  const int64_t per = static_cast<int64_t>(scratch_.size() / c.elem);
  const int64_t first = (*c.displs_in)[c.me];
  for (int64_t lo = 0; lo < count; lo += per) {
    const int64_t m = std::min(per, count - lo);
    char* dst = c.out + c.bytes(lo);
    const char* a = c.in + c.bytes(first + lo);
    if (r.scales_input()) {
      reduce::copy_scaled(dst, a, m, v.dtype, r.prescale);
      a = dst;
    }
    for (int p = 0; p < c.n; ++p) {
      if (p == c.me) continue;
      // A mapped peer's piece is reduced where it lies (unless it needs its
      // factor first); any other is read into the scratch.
      const char* piece = peer_source_[static_cast<size_t>(p)];
      if (piece != nullptr) piece += c.bytes(first + lo);
      if (piece == nullptr || r.scales_input()) {
        char* into = scratch_.data();
        if (piece != nullptr) {
          reduce::scale(into, piece, m, v.dtype, r.prescale);
        } else {
          KOLO_RETURN_IF_ERROR_AS_IS(read_source(c, p, first + lo, into, m));
          if (r.scales_input()) reduce::scale(into, into, m, v.dtype, r.prescale);
        }
        piece = into;
      }
      reduce::reduce(dst, a, piece, m, v.dtype, r.op);
      a = dst;
    }
    transport::finish_output(r, dst, m, v.dtype);
  }
  return Status::OK();
}

}  // namespace kolo::shm
