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
#include "transports/shm/peer_read.h"

namespace kolo::shm {
namespace {

using namespace collectives_layout;  // NOLINT: the engine's own layout
using transport::CollectiveOp;
using transport::CollectiveView;

}  // namespace

// Note [Streaming slots across distant cores]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The reader of a slot copies lines that the writer's core has just written.
// When the two cores share a cache that is cheap; when they are far apart
// (another core complex: the development VM moves between the two, see
// allreduce.cc's Note of the same name) every line is fetched from the
// writer's cache one at a time: in such a placement (round trip 346 ns, load
// 5.5) the engine moved 3.3-3.5 GB/s for every collective from 1 MiB, where
// near it moves 7-19 and MPI moved 5-16 beside it. Streaming stores send the
// slot's lines to memory instead, from where the reader streams them; the
// allreduce measured that they win far and lose near (docs/perf, "Streaming
// stores across distant cores"), and near this engine measured it too (16 MiB
// broadcast 1.0 -> 1.6 ms streamed). So the engine follows the node's verdict
// on the cores' distance, which the allreduce follows too (core_distance.h,
// Note [One calibration for the node]): local ranks 0 and 1 time a few round
// trips (on the first call of either engine that could stream — here, whose
// largest block is kStreamSlotMinBytes or more, counted as n times the largest
// block: the same calls on every rank, the sizes coming from the headers —
// then after every 64 such calls or 256 MiB of them) and rank 0 publishes the
// verdict, which every rank follows. The writers of such
// calls then stream their slots and fence before they post (a call's first
// round, written before the headers are read, follows this rank's own size and
// the last verdict). Both ways give the same bytes.
//
// Why kStreamSlotMinBytes is 2 KiB: far apart a plain slot costs most at the
// small sizes, where the reader pulls a few hundred lines that all sit in the
// writer's cache. 2 ranks, shm_collectives_bench --stream_slot_from=0, plain
// against streamed, medians of runs whose placement probe read 307-415 ns
// before and after (load 2.3-3.4): allgather of 4 KiB 1.73 -> 1.42 us, 16 KiB
// 5.49 -> 2.33, 64 KiB 19-22 -> 4.3-5.9, 256 KiB 66-71 -> 14-21; alltoall,
// broadcast and reducescatter alike (broadcast 64 KiB 30 -> 4.4 us). With the
// old 64 KiB floor a 64 KiB allgather (32 KiB blocks) stayed plain and cost as
// much as a streamed 256 KiB one (the dip of issue 15). Near, streaming loses
// at 4-16 KiB (allgather 4 KiB 0.52 -> 0.97 us) but near never streams.
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
// hand-offs, and so do large pieces near. shm_collectives_bench
// --broadcast_pieces_max_bytes, 2 ranks, engine time in us, 4 runs each, near
// (round trip 53-58 ns) whole / pieces of an eighth (at least 4 KiB): 16 KiB
// 2.12 / 1.37, 64 KiB 7.80 / 4.72, while 256 KiB 28.2 / 30.8, 512 KiB 36.6 /
// 61.3, 1 MiB 26.8 / 123; far (313-345 ns, 11-12 runs): 16 KiB 1.92 / 3.38,
// 64 KiB 4.52 / 9.46. So pieces for broadcasts up to 64 KiB, near only. The
// verdict is the last calibration's (Note [Streaming slots across distant
// cores]) and the count the call's, both the same on every rank, so every rank
// cuts the call alike; it is decided before the first round is written.
//
// Note [Large broadcasts in pieces, far]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Far apart the root streams its slot to memory and the receivers read it from
// there; a call in one round does the two one after the other, and a call of
// several 1 MiB rounds starts and ends with a whole slot's worth done alone. In
// pieces of a quarter of the call (128 to 256 KiB) the receivers read a piece
// while the root streams the next. Through kolo (kolo-allreduce-perf
// --collective broadcast -r mpi, 2 ranks, -n 50; only runs whose every
// calibration said far), kolo's us, whole / pieces of 128 KiB / of 256 KiB, 1-2
// runs each: 256 KiB 30.1 / 26.4 / 31.4 (one round), 512 KiB 54.5 / 44.0 /
// 43.9, 1 MiB 120.8 / 91.6 / 91.6, 2 MiB 189.5 / 132.8 / 132.9, 4 MiB 364 / 236
// / 240, 64 MiB 5191 / - / 4691. Below 128 KiB the rounds' hand-offs cost more
// than the overlap gains (the Note above: 64 KiB far 4.5 whole against 9.5 us
// in eighths). Near, quarters cost more (through kolo, 3 runs: 256 KiB 26.2
// whole / 30.4 in quarters, 512 KiB 46.7 / 52.7 us; the engine alone: the Note
// above). Allgather, whose ranks all write and read in every round, gained
// nothing far (1-4 MiB within the noise, 3 runs each) and is not cut; nor is
// alltoall (512 KiB to 2 MiB, likewise).
int64_t ShmCollectives::broadcast_piece(const Call& c) const {
  const size_t bytes = c.bytes(c.view->count);
  size_t per = 0;
  if (far_) {
    if (bytes <= options_.far_broadcast_pieces_above_bytes) return c.piece;
    per = std::min(std::max(bytes / 4, kFarBroadcastPieceMinBytes), kFarBroadcastPieceMaxBytes);
  } else {
    if (bytes > options_.broadcast_pieces_max_bytes) return c.piece;
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
// (kSingleCopyMinBytes is SIZE_MAX): quiet, process_vm_readv moves 5.4 GB/s on
// this VM where memcpy moves 9.7, and the slots won at every size from 1 to
// 256 MiB, 2 ranks and 4 on 2 cores (64 MiB allgather 8.8 against 13.0 ms;
// docs/perf, "Design measurements"). Kept for nodes where such reads run at
// copy speed; the bench's --engine=single measures it.
Status ShmCollectives::copy_direct(const Call& c) {
  const CollectiveView& v = *c.view;
  auto pid = [&](int p) { return static_cast<pid_t>(header(p, c.first)[kPid]); };
  auto at = [&](int p, int64_t elements) {
    return reinterpret_cast<const char*>(static_cast<uintptr_t>(header(p, c.first)[kAddress])) +
           c.bytes(elements);
  };
  switch (c.op) {
    case CollectiveOp::kBroadcast:
      if (c.me == v.root) {
        if (c.bcast_src != c.out) copy_bytes(c.out, c.bcast_src, c.bytes(v.count));
        return Status::OK();
      }
      return read_peer(pid(v.root), at(v.root, 0), c.out, c.bytes(v.count));
    case CollectiveOp::kReducescatter:
      return reduce_direct(c);
    case CollectiveOp::kAllgather:
    case CollectiveOp::kAlltoall:
      break;
  }
  const bool alltoall = c.op == CollectiveOp::kAlltoall;
  for (int p = 0; p < c.n; ++p) {
    const int64_t m = v.recv_counts[p];
    char* dst = c.out + c.bytes((*c.displs_out)[p]);
    if (p == c.me) {
      // The first round's piece is there already (post_own(), copy_own()).
      const int64_t done = c.len(m, 0);
      const char* src = c.in + c.bytes((alltoall ? (*c.displs_in)[c.me] : 0) + done);
      if (src != dst + c.bytes(done)) copy_bytes(dst + c.bytes(done), src, c.bytes(m - done));
      continue;
    }
    int64_t skip = 0;  // alltoall: where p's block for this rank starts in p's input
    for (int d = 0; alltoall && d < c.me; ++d) skip += header(p, c.first)[kFields + d];
    KOLO_RETURN_IF_ERROR_AS_IS(read_peer(pid(p), at(p, skip), dst, c.bytes(m)));
  }
  return Status::OK();
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
      const int64_t* h = header(p, c.first);
      const char* remote =
          reinterpret_cast<const char*>(static_cast<uintptr_t>(h[kAddress])) + c.bytes(first + lo);
      KOLO_RETURN_IF_ERROR_AS_IS(
          read_peer(static_cast<pid_t>(h[kPid]), remote, scratch_.data(), c.bytes(m)));
      if (r.scales_input()) reduce::scale(scratch_.data(), scratch_.data(), m, v.dtype, r.prescale);
      reduce::reduce(dst, a, scratch_.data(), m, v.dtype, r.op);
      a = dst;
    }
    transport::finish_output(r, dst, m, v.dtype);
  }
  return Status::OK();
}

}  // namespace kolo::shm
