// Alltoall(v) over point-to-point verbs, by pairwise exchange.
//
// Step k = 1 .. n-1: rank r sends its block for rank r+k and receives rank r-k's
// block for it (pairwise_to / pairwise_from, p2p_schedule.h); its own block is a
// local copy. Over the n-1 steps every ordered pair (s, d) meets exactly once,
// and at each step every rank sends one block and receives one, so no rank is
// swamped by n-1 senders at once. n = 4, the peers rank r sends to:
//
//   step   rank 0   rank 1   rank 2   rank 3
//   1      1        2        3        0        (receives from r-1)
//   2      2        3        0        1        (receives from r-2)
//   3      3        0        1        2        (receives from r-3)
//
// A block moves in segments (the ring's segment size): receives land straight
// in the output, sends read the input. All of a step's segments are posted at
// once and waited before the next step.
//
// Cost: n-1 steps; each rank sends everything it holds for others once and
// receives everything for it once: the least traffic an alltoall can have, with
// n-1 message latencies. An input that overlaps the output is copied first.
#include <algorithm>
#include <cstring>
#include <string>

#include "algorithms/p2p_collectives.h"
#include "algorithms/p2p_requests.h"
#include "algorithms/p2p_schedule.h"
#include "algorithms/ring_schedule.h"
#include "algorithms/tags.h"

namespace kolo::algorithms {
namespace {

Status check_side(const std::vector<int64_t>& counts, const std::vector<int64_t>& displs, int size,
             const char* side) {
  bool ok = counts.size() == static_cast<size_t>(size) && displs.size() == counts.size();
  for (size_t r = 0; ok && r < counts.size(); ++r) ok = counts[r] >= 0 && displs[r] >= 0;
  if (ok) return Status::OK();
  return invalid_argument(std::string("p2p alltoall: ") + side +
                          " counts and displacements are not one value >= 0 for each of " +
                          std::to_string(size) + " ranks (got " + std::to_string(counts.size()) +
                          " and " + std::to_string(displs.size()) + ")");
}

int64_t extent(const std::vector<int64_t>& counts, const std::vector<int64_t>& displs) {
  int64_t end = 0;
  for (size_t r = 0; r < counts.size(); ++r) {
    if (counts[r] > 0) end = std::max(end, displs[r] + counts[r]);
  }
  return end;
}

}  // namespace

Status P2PCollectives::alltoallv(const void* input, const std::vector<int64_t>& send_counts,
                                 const std::vector<int64_t>& send_displs, void* output,
                                 const std::vector<int64_t>& recv_counts,
                                 const std::vector<int64_t>& recv_displs, DataType dtype) {
  const int size = p2p_.size(), rank = p2p_.rank();
  if (!is_valid(dtype)) return invalid_argument("p2p alltoall: invalid dtype " + dtype_name(dtype));
  KOLO_RETURN_IF_ERROR_AS_IS(check_side(send_counts, send_displs, size, "send"));
  KOLO_RETURN_IF_ERROR_AS_IS(check_side(recv_counts, recv_displs, size, "receive"));
  if (send_counts[rank] != recv_counts[rank])
    return invalid_argument("p2p alltoall: rank " + std::to_string(rank) + " sends itself " +
                            std::to_string(send_counts[rank]) + " elements but expects " +
                            std::to_string(recv_counts[rank]));
  const size_t elem = dtype_size(dtype);
  const size_t in_bytes = static_cast<size_t>(extent(send_counts, send_displs)) * elem;
  const size_t out_bytes = static_cast<size_t>(extent(recv_counts, recv_displs)) * elem;
  if ((in_bytes > 0 && input == nullptr) || (out_bytes > 0 && output == nullptr))
    return invalid_argument("p2p alltoall: a null buffer for a block of elements");
  const char* in = unaliased(input, in_bytes, output, out_bytes);
  char* out = static_cast<char*>(output);
  auto at = [elem](auto* base, int64_t displ) { return base + static_cast<size_t>(displ) * elem; };
  if (send_counts[rank] > 0)
    std::memcpy(at(out, recv_displs[rank]), at(in, send_displs[rank]),
                static_cast<size_t>(send_counts[rank]) * elem);
  const int64_t seg = segment_elems(elem);
  for (int k = 1; k < size; ++k) {
    Requests requests(p2p_, tags::kAlltoall);
    const int from = pairwise_from(rank, size, k), to = pairwise_to(rank, size, k);
    const Range recv{recv_displs[from], recv_counts[from]}, send{send_displs[to], send_counts[to]};
    for (int64_t g = 0; g < RingSchedule::num_segments(recv.count, seg); ++g) {
      const Range r = RingSchedule::segment(recv, seg, g);
      KOLO_RETURN_IF_ERROR(requests.recv(from, at(out, r.begin), static_cast<size_t>(r.count) * elem));
    }
    for (int64_t g = 0; g < RingSchedule::num_segments(send.count, seg); ++g) {
      const Range r = RingSchedule::segment(send, seg, g);
      KOLO_RETURN_IF_ERROR(requests.send(to, at(in, r.begin), static_cast<size_t>(r.count) * elem));
    }
    KOLO_RETURN_IF_ERROR(requests.wait_all());
  }
  return Status::OK();
}

}  // namespace kolo::algorithms
