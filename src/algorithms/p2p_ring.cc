// The ring pass behind allgatherv and reducescatter (P2PCollectives::ring_pass).
//
// The n ranks form a ring; each sends only to its right neighbour and receives
// only from its left one, so every link carries the same load:
//
//        +--> rank 0 --> rank 1 --> rank 2 --> ... --> rank n-1 --+
//        |                                                        |
//        +--------------------------------------------------------+
//
// The layout has one block per rank, of any size (0 included): block b is
// counts[b] elements at displs[b]. In n-1 steps every block travels n-1 hops
// (RingPass in p2p_schedule.h holds the index math):
//
//   allgatherv: at step 0 rank r sends its own block; at step s it receives
//     block r-s-1 into its place in the output, and forwards it at step s+1.
//   reducescatter: at step 0 rank r sends its input's block r-1; at step s it
//     receives the partial reduction of block r-s-2 from the left, combines it
//     with its own input's part of that block, and forwards the result at step
//     s+1. The block it receives last (s = n-2) is its own, b = r, which has then
//     picked up every rank's contribution: it is combined straight into output.
//
//   n = 3, reducescatter; "2+0" is ranks 2's and 0's parts combined:
//   step  rank 0                rank 1                rank 2
//   0     send B2, recv B1      send B0, recv B2      send B1, recv B0
//         B1 = 2+0              B2 = 0+1              B0 = 1+2
//   1     send B1, recv B0      send B2, recv B1      send B0, recv B2
//         B0 = 1+2+0: its own   B1 = 2+0+1: its own   B2 = 0+1+2: its own
//
// Segments and rounds: a block moves in segments of at most S elements. The pass
// runs in rounds g = 0, 1, ...: round g moves segment g of every block that has
// one, through all n-1 steps. So what rank r combines at step s of round g is
// forwarded at once and combined by rank r+1 at step s+1 of the same round: a
// rank holds only the few segments in flight (reducescatter: kSlots of them,
// never a whole block), and the rounds stream through the ring as a pipeline
// (round g+1 starts at rank r while round g is still on its way around).
// Receives are posted kAhead segments ahead, so a segment's transfer overlaps
// the combining of the one before. Everyone walks the same (round, step) order,
// so the segments between one pair of ranks are sent and received in the same
// order on one tag (tags::kAllgather or kReducescatter).
//
// Cost: n-1 steps per round; each rank sends and receives (n-1)/n of the layout
// (every block but one, once), as a ring allreduce does in either of its phases.
// Latency: (rounds + n - 2) segment times, so it suits large layouts; small ones
// pay n-1 message latencies.
#include <algorithm>
#include <cstring>

#include "algorithms/p2p_collectives.h"
#include "algorithms/p2p_requests.h"
#include "algorithms/p2p_schedule.h"
#include "algorithms/ring_schedule.h"
#include "algorithms/tags.h"
#include "reduce/reduce.h"

namespace kolo::algorithms {
namespace {

// Segments in flight per rank, and how far ahead receives are posted. A slot is
// reused kSlots receives later, after its forward has been waited for: with
// kAhead < kSlots that forward was posted kSlots - kAhead receives ago, so the
// wait rarely blocks.
constexpr int kSlots = 4;
constexpr int kAhead = 2;

}  // namespace

// The events in the order this rank meets them: round by round, the round's
// first send, then its receives step by step (receives_ indexes the receives).
void P2PCollectives::plan_ring(const RingPass& pass, const std::vector<int64_t>& counts,
                               const std::vector<int64_t>& displs, int64_t seg) {
  events_.clear();
  receives_.clear();
  auto add = [&](bool first_send, int step, int b, int64_t g) {
    if (g >= RingSchedule::num_segments(counts[b], seg)) return;
    const Range r = RingSchedule::segment(Range{displs[b], counts[b]}, seg, g);
    if (!first_send) receives_.push_back(events_.size());
    events_.push_back(RingEvent{first_send, step, b, r.begin, r.count});
  };
  const int64_t largest = *std::max_element(counts.begin(), counts.end());
  for (int64_t g = 0, rounds = RingSchedule::num_segments(largest, seg); g < rounds; ++g) {
    add(true, 0, pass.first_send(), g);
    for (int s = 0; s < pass.steps(); ++s) add(false, s, pass.recv_block(s), g);
  }
}

Status P2PCollectives::ring_pass(bool reduce, const char* input, char* output,
                                 const std::vector<int64_t>& counts,
                                 const std::vector<int64_t>& displs, DataType dtype, ReduceOp op) {
  const RingPass pass(p2p_.rank(), p2p_.size(), reduce ? 1 : 0);
  const size_t elem = dtype_size(dtype);
  const int64_t largest = *std::max_element(counts.begin(), counts.end());
  if (largest == 0) return Status::OK();
  const int64_t seg = std::min(segment_elems(elem), largest);
  const size_t slot_bytes = static_cast<size_t>(seg) * elem;

  plan_ring(pass, counts, displs, seg);
  if (reduce && slots_.size() < kSlots * slot_bytes) slots_.resize(kSlots * slot_bytes);  // grow-only

  Requests requests(p2p_, reduce ? tags::kReducescatter : tags::kAllgather);
  transport::RequestId recv_id[kSlots] = {}, forward_id[kSlots] = {};
  bool forwarding[kSlots] = {};
  // Where receive j lands: its slot (reducescatter) or its place in the output.
  auto target = [&](size_t j) {
    return reduce ? slots_.data() + (j % kSlots) * slot_bytes
                  : output + static_cast<size_t>(events_[receives_[j]].begin) * elem;
  };
  size_t posted = 0;
  auto post = [&](size_t j) -> Status {
    const size_t k = j % kSlots;
    if (forwarding[k]) {  // the slot's last forward must be done before reuse
      forwarding[k] = false;
      KOLO_RETURN_IF_ERROR(requests.wait(forward_id[k]));
    }
    return requests.recv(pass.left(), target(j), static_cast<size_t>(events_[receives_[j]].count) * elem,
                         &recv_id[k]);
  };

  size_t j = 0;  // the next receive
  const int last_step = pass.steps() - 1;
  for (const RingEvent& e : events_) {
    const size_t bytes = static_cast<size_t>(e.count) * elem;
    const char* own = input + static_cast<size_t>(e.begin) * elem;
    if (e.first_send) {
      KOLO_RETURN_IF_ERROR(requests.send(pass.right(), own, bytes));
      continue;
    }
    for (; posted < std::min(receives_.size(), j + kAhead + 1); ++posted) {
      KOLO_RETURN_IF_ERROR(post(posted));
    }
    const size_t k = j % kSlots;
    KOLO_RETURN_IF_ERROR(requests.wait(recv_id[k]));
    char* got = target(j);
    if (reduce && e.step == last_step) {  // this rank's block: finished into output
      char* out = output + static_cast<size_t>(e.begin - displs[pass.rank]) * elem;
      reduce::reduce(out, own, got, e.count, dtype, op);
    } else if (e.step != last_step) {
      if (reduce) reduce::reduce(got, own, got, e.count, dtype, op);
      KOLO_RETURN_IF_ERROR(requests.send(pass.right(), got, bytes, &forward_id[k]));
      forwarding[k] = true;
    }
    ++j;
  }
  return requests.wait_all();
}

}  // namespace kolo::algorithms
