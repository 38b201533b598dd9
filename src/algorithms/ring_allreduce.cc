// Ring allreduce: a reduce-scatter followed by an allgather, around a ring.
//
// The n ranks form a ring. Each rank sends only to its right neighbour (rank+1)
// and receives only from its left neighbour (rank-1), so every link carries the
// same load and no rank is a bottleneck:
//
//        +--> rank 0 --> rank 1 --> rank 2 --> ... --> rank n-1 --+
//        |                                                        |
//        +--------------------------------------------------------+
//
// The buffer is cut into n chunks C0 .. C{n-1} (sizes differ by at most one;
// see ring_schedule.h, which holds all the index math).
//
// Phase 1, reduce-scatter, n-1 steps. At step s, rank r sends chunk (r - s) to
// the right and receives chunk (r - s - 1) from the left, which it combines with
// its own contribution to that chunk. What a rank sends at step s+1 is what it
// combined at step s, so a chunk picks up one more rank's contribution per hop.
// For n = 3, writing "2+0" for the reduction of rank 2's and rank 0's parts:
//
//   step  rank 0                rank 1                rank 2
//   0     send C0, recv C2      send C1, recv C0      send C2, recv C1
//         C2 = 2+0              C0 = 0+1              C1 = 1+2
//   1     send C2, recv C1      send C0, recv C2      send C1, recv C0
//         C1 = 1+2+0            C2 = 2+0+1            C0 = 0+1+2
//
// After n-1 steps rank r holds the full reduction of chunk (r + 1).
//
// Phase 2, allgather, n-1 steps. At step s, rank r forwards the finished chunk
// (r + 1 - s) and receives the finished chunk (r - s), which it copies into place.
// After n-1 steps every rank holds every finished chunk.
//
// Cost: 2(n-1) steps; each rank sends (and receives) n-1 chunks per phase, i.e.
// 2(n-1)/n of the buffer in total, nearly independent of n. That makes the ring
// bandwidth-optimal for large buckets; its 2(n-1) latencies make it a poor choice
// for small ones (see Note [Auto order] in src/transport/selection.cc).
//
// Segments: a chunk moves in segments of at most RingOptions::segment_bytes. In
// the reduce-scatter, the receive of segment k+1 is posted (into the other half
// of a two-segment scratch buffer) before segment k is reduced, so reduction
// overlaps the transfer. What a step receives (and reduces) is what the next
// step sends, and each segment goes on as soon as it is in: step s+1's sends are
// posted segment by segment inside step s (the first step's, all at once, from
// `input`), so a rank's link carries the next step while its left neighbour is
// still finishing this one (Note [Sends run a step ahead]).
//
// Input and output: the local operand of a chunk is read from `input` at the one
// step where that chunk is combined, and the result is written to `output`; so an
// out-of-place call never copies its input, and in place costs nothing extra.
// Every chunk of `output` is written: n-1 of them by the reduce-scatter, and the
// chunk a rank sent first (chunk r) by the allgather's first step.
//
// Messages all use one tag (tags::kRing, Note [Tag spaces] in tags.h): between
// one pair of ranks messages with equal tags arrive in order, every rank posts
// the segments in the same order, and calls happen in the same order on every
// rank.
//
// Note [Sends run a step ahead]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// With each step's sends posted at its start, a rank whose left neighbour
// started late finished sending first and then left its link idle until its
// own receive was in and it could begin the next step; over a network link
// that idle time was 30-60 ms of a 650 ms 64 MiB allreduce at 2 hosts x 1 rank
// (docs/socket-world.md). Posted as soon as each segment is in, the next step's
// sends queue behind the current ones and the link stays busy. The
// allgather's receives write the chunks the reduce-scatter's sends read (in
// place, `input` too), and a send's buffer may not change until the send is
// done (PointToPoint's contract): each segment's receive is posted once the
// send that read it is done. Waiting for all of them first cost the time of a
// late neighbour again, in the clear-to-send the peer waited for.
#include "algorithms/ring_allreduce.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "algorithms/p2p_requests.h"
#include "algorithms/ring_schedule.h"
#include "algorithms/tags.h"
#include "common/check.h"
#include "common/failpoint.h"
#include "reduce/reduce.h"
#include "transport/reduction.h"

namespace kolo::algorithms {
namespace {

using transport::PointToPoint;
using transport::RequestId;

// One call of RingAllreduce::run, once the trivial cases are out of the way.
class RingRun {
 public:
  RingRun(PointToPoint& p2p, const RingSchedule& schedule, const void* input, void* output,
          DataType dtype, ReduceOp op, int64_t segment_elems, char* scratch)
      : p2p_(p2p),
        schedule_(schedule),
        input_(static_cast<const char*>(input)),
        output_(static_cast<char*>(output)),
        dtype_(dtype),
        op_(op),
        elem_(dtype_size(dtype)),
        segment_elems_(segment_elems),
        scratch_(scratch) {}

  Status run() {
    Requests rs_sends(p2p_, tags::kRing), ag_sends(p2p_, tags::kRing);
    const int last = schedule_.steps() - 1;
    for (int s = 0; s <= last; ++s) {
      KOLO_RETURN_IF_ERROR(reduce_scatter_step(s, rs_sends, s < last ? rs_sends : ag_sends));
    }
    for (int s = 0; s <= last; ++s) {
      KOLO_RETURN_IF_ERROR(allgather_step(s, rs_sends, ag_sends));
    }
    KOLO_RETURN_IF_ERROR(rs_sends.wait_all());
    return ag_sends.wait_all();
  }

 private:
  size_t bytes(const Range& r) const { return static_cast<size_t>(r.count) * elem_; }
  size_t offset(const Range& r) const { return static_cast<size_t>(r.begin) * elem_; }
  char* slot(int64_t k) { return scratch_ + (k % 2) * segment_elems_ * elem_; }

  // Posts a send of every segment of `chunk`, read from `base`; their ids go to
  // `ids`.
  Status send_chunk(Requests& sends, const Range& chunk, const char* base,
                    std::vector<RequestId>* ids) {
    const int64_t n = RingSchedule::num_segments(chunk.count, segment_elems_);
    for (int64_t k = 0; k < n; ++k) {
      const Range seg = RingSchedule::segment(chunk, segment_elems_, k);
      ids->emplace_back();
      KOLO_RETURN_IF_ERROR(
          sends.send(schedule_.right(), base + offset(seg), bytes(seg), &ids->back()));
    }
    return Status::OK();
  }

  // Step s of phase 1: receive a partial chunk segment by segment into scratch,
  // combine it with our input into output, and pass each combined segment on as
  // the next step's send (`next`). Step 0 first sends our own part of its chunk.
  Status reduce_scatter_step(int s, Requests& sends, Requests& next) {
    Requests recvs(p2p_, tags::kRing);
    const Range recv = schedule_.chunk(schedule_.reduce_scatter_recv(s));
    const int64_t n = RingSchedule::num_segments(recv.count, segment_elems_);
    std::vector<RequestId> ids(static_cast<size_t>(n));
    auto post = [&](int64_t k) {
      const Range seg = RingSchedule::segment(recv, segment_elems_, k);
      return recvs.recv(schedule_.left(), slot(k), bytes(seg), &ids[k]);
    };
    if (n > 0) KOLO_RETURN_IF_ERROR(post(0));
    // At step 0 the chunk we send holds only our own part: it is still in input.
    if (s == 0) {
      sent_.assign(static_cast<size_t>(schedule_.steps()), {});
      KOLO_RETURN_IF_ERROR(
          send_chunk(sends, schedule_.chunk(schedule_.reduce_scatter_send(0)), input_, &sent_[0]));
    }
    failpoint("ring");
    for (int64_t k = 0; k < n; ++k) {
      if (k + 1 < n) KOLO_RETURN_IF_ERROR(post(k + 1));
      KOLO_RETURN_IF_ERROR(recvs.wait(ids[k]));
      const Range seg = RingSchedule::segment(recv, segment_elems_, k);
      reduce::reduce(output_ + offset(seg), input_ + offset(seg), slot(k), seg.count, dtype_, op_);
      RequestId id = 0;
      KOLO_RETURN_IF_ERROR(next.send(schedule_.right(), output_ + offset(seg), bytes(seg), &id));
      if (s + 1 < schedule_.steps()) sent_[s + 1].push_back(id);
    }
    return recvs.wait_all();
  }

  // Step s of phase 2: receive a finished chunk straight into output and pass
  // each segment on as the next step's send (its own sends were posted by the
  // step before). The chunk is the one reduce-scatter step s sent: a segment's
  // receive is posted once its send there is done (Note [Sends run a step ahead]).
  Status allgather_step(int s, Requests& rs_sends, Requests& sends) {
    Requests recvs(p2p_, tags::kRing);
    const Range recv = schedule_.chunk(schedule_.allgather_recv(s));
    const int64_t n = RingSchedule::num_segments(recv.count, segment_elems_);
    std::vector<RequestId> ids(static_cast<size_t>(n));
    for (int64_t k = 0; k < n; ++k) {
      KOLO_RETURN_IF_ERROR(rs_sends.wait(sent_[s][k]));
      const Range seg = RingSchedule::segment(recv, segment_elems_, k);
      KOLO_RETURN_IF_ERROR(
          recvs.recv(schedule_.left(), output_ + offset(seg), bytes(seg), &ids[k]));
    }
    for (int64_t k = 0; k < n; ++k) {
      KOLO_RETURN_IF_ERROR(recvs.wait(ids[k]));
      if (s + 1 == schedule_.steps()) continue;
      const Range seg = RingSchedule::segment(recv, segment_elems_, k);
      KOLO_RETURN_IF_ERROR(sends.send(schedule_.right(), output_ + offset(seg), bytes(seg)));
    }
    return Status::OK();
  }

  PointToPoint& p2p_;
  const RingSchedule& schedule_;
  const char* input_;
  char* output_;
  DataType dtype_;
  ReduceOp op_;
  size_t elem_;
  int64_t segment_elems_;
  char* scratch_;
  std::vector<std::vector<RequestId>> sent_;  // reduce-scatter step -> its sends' ids
};

Status validate(const void* input, void* output, int64_t count, DataType dtype, ReduceOp op) {
  if (!is_valid(dtype))
    return invalid_argument("ring allreduce: invalid dtype " + dtype_name(dtype));
  if (!is_elementwise(op)) {
    return invalid_argument("ring allreduce: op must be sum, min, max or product, not " +
                            op_name(op));
  }
  if (count < 0) return invalid_argument("ring allreduce: negative count " + std::to_string(count));
  if (count > 0 && (input == nullptr || output == nullptr)) {
    return invalid_argument("ring allreduce: null buffer");
  }
  return Status::OK();
}

}  // namespace

RingAllreduce::RingAllreduce(transport::PointToPoint& p2p, RingOptions options)
    : p2p_(p2p), options_(options) {}

Status RingAllreduce::run(const void* input, void* output, int64_t count, DataType dtype,
                          ReduceOp op) {
  KOLO_RETURN_IF_ERROR(validate(input, output, count, dtype, op));
  if (count == 0) return Status::OK();
  const size_t elem = dtype_size(dtype);
  if (p2p_.size() == 1) {
    if (input != output) std::memcpy(output, input, static_cast<size_t>(count) * elem);
    return Status::OK();
  }
  const RingSchedule schedule(p2p_.rank(), p2p_.size(), count);
  // Never more than a chunk: small buckets need no more scratch than they move.
  const int64_t segment_elems =
      std::min<int64_t>(std::max<int64_t>(1, static_cast<int64_t>(options_.segment_bytes / elem)),
                        std::max<int64_t>(1, schedule.max_chunk_count()));
  const size_t scratch_bytes = 2 * static_cast<size_t>(segment_elems) * elem;
  if (scratch_.size() < scratch_bytes) scratch_.resize(scratch_bytes);  // grow-only
  RingRun ring(p2p_, schedule, input, output, dtype, op, segment_elems, scratch_.data());
  return ring.run();
}

}  // namespace kolo::algorithms
