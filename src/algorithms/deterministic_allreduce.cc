// Deterministic allreduce: a direct reduce-scatter folded in rank order, then a
// ring allgather.
//
// The buffer is cut into n chunks C0 .. C{n-1} as the ring cuts it
// (RingSchedule::chunk); rank j owns chunk Cj.
//
// Phase 1, reduce-scatter by direct exchange. Every rank sends its copy of Cj
// straight to rank j, and rank j folds the n copies of each element in rank
// order with reduce::fold (fold.h):
//
//   rank 0's C1 --+
//   rank 1's C1 --+--> rank 1: C1 = ((x0 + x1) + x2) + x3, in rank order,
//   rank 2's C1 --+             in float for float16 / bfloat16, rounded once
//   rank 3's C1 --+
//
// A ring cannot give this: there each chunk's sum starts at a different rank,
// so the order of the terms depends on which chunk an element falls in, i.e. on
// the count and the world size. Here the order is the same for every element, and
// an element's bits depend only on the n values: not on the chunk, the segment
// or the count.
//
// Chunks move in segments of at most S elements, in rounds: in round g every
// rank sends segment g of each of its peers' chunks and receives segment g of
// its own chunk from each peer, into one of two sets of n slots (round g+1's
// receives are posted before round g is folded, so its transfers overlap the
// fold).
//
// Phase 2, a ring allgather of the finished chunks (P2PCollectives::allgatherv,
// in place): copies only, so every rank ends with the same bits.
//
// Cost: each rank sends and receives (n-1)/n of the buffer in each phase — as
// the ring allreduce — but phase 1's n-1 transfers at a time go to every peer,
// not only to a neighbour, and the fold reads n inputs per element. Latency:
// 1 + (n-1) message latencies.
#include "algorithms/deterministic_allreduce.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "algorithms/p2p_requests.h"
#include "algorithms/ring_schedule.h"
#include "algorithms/tags.h"
#include "common/check.h"
#include "reduce/fold.h"

namespace kolo::algorithms {

DeterministicAllreduce::DeterministicAllreduce(transport::PointToPoint& p2p, RingOptions options)
    : p2p_(p2p), options_(options), allgather_(p2p, options) {}

Status DeterministicAllreduce::run(const void* input, void* output, int64_t count, DataType dtype,
                                   ReduceOp op) {
  const std::string what = "deterministic allreduce";
  if (!is_valid(dtype)) return invalid_argument(what + ": invalid dtype " + dtype_name(dtype));
  if (!is_elementwise(op))
    return invalid_argument(what + ": op must be sum, min, max or product, not " + op_name(op));
  if (count < 0) return invalid_argument(what + ": negative count " + std::to_string(count));
  if (count > 0 && (input == nullptr || output == nullptr))
    return invalid_argument(what + ": null buffer");
  if (count == 0) return Status::OK();
  const size_t elem = dtype_size(dtype);
  const int n = p2p_.size(), rank = p2p_.rank();
  if (n == 1) {
    if (input != output) std::memcpy(output, input, static_cast<size_t>(count) * elem);
    return Status::OK();
  }
  const RingSchedule chunks(rank, n, count);
  counts_.resize(n);
  displs_.resize(n);
  for (int j = 0; j < n; ++j) {
    counts_[j] = chunks.chunk(j).count;
    displs_[j] = chunks.chunk(j).begin;
  }
  char* out = static_cast<char*>(output);
  KOLO_RETURN_IF_ERROR(reduce_scatter(static_cast<const char*>(input), out, dtype, op));
  return allgather_.allgatherv(out + static_cast<size_t>(displs_[rank]) * elem, out, counts_,
                               displs_, dtype);
}

Status DeterministicAllreduce::reduce_scatter(const char* input, char* output, DataType dtype,
                                              ReduceOp op) {
  const int n = p2p_.size(), rank = p2p_.rank();
  const size_t elem = dtype_size(dtype);
  const int64_t largest = counts_[0];  // chunk 0 is never smaller than another
  const int64_t seg = std::min(std::max<int64_t>(1, static_cast<int64_t>(options_.segment_bytes / elem)),
                               std::max<int64_t>(1, largest));
  const size_t slot_bytes = static_cast<size_t>(seg) * elem;
  if (slots_.size() < 2 * n * slot_bytes) slots_.resize(2 * n * slot_bytes);  // grow-only
  auto slot = [&](int64_t g, int q) { return slots_.data() + ((g % 2) * n + q) * slot_bytes; };
  auto piece = [&](int j, int64_t g) { return RingSchedule::segment(Range{displs_[j], counts_[j]}, seg, g); };
  auto has = [&](int j, int64_t g) { return g < RingSchedule::num_segments(counts_[j], seg); };
  const int64_t rounds = RingSchedule::num_segments(largest, seg);

  Requests requests(p2p_, tags::kDeterministic);
  std::vector<transport::RequestId> recv_ids(2 * n);
  // Round g: receive segment g of this rank's chunk from every peer, send
  // segment g of every peer's chunk to it. Both sides skip a chunk without it.
  auto post = [&](int64_t g) -> Status {
    if (g >= rounds) return Status::OK();
    for (int q = 0; q < n; ++q) {
      if (q == rank || !has(rank, g)) continue;
      const size_t bytes = static_cast<size_t>(piece(rank, g).count) * elem;
      KOLO_RETURN_IF_ERROR(requests.recv(q, slot(g, q), bytes, &recv_ids[(g % 2) * n + q]));
    }
    for (int k = 1; k < n; ++k) {
      const int p = (rank + k) % n;  // staggered, so peers are not all hit at once
      if (!has(p, g)) continue;
      const Range r = piece(p, g);
      KOLO_RETURN_IF_ERROR(requests.send(p, input + static_cast<size_t>(r.begin) * elem,
                                         static_cast<size_t>(r.count) * elem));
    }
    return Status::OK();
  };
  inputs_.resize(n);
  KOLO_RETURN_IF_ERROR(post(0));
  for (int64_t g = 0; g < rounds; ++g) {
    KOLO_RETURN_IF_ERROR(post(g + 1));
    if (!has(rank, g)) continue;
    const Range r = piece(rank, g);
    for (int q = 0; q < n; ++q) {
      if (q != rank) KOLO_RETURN_IF_ERROR(requests.wait(recv_ids[(g % 2) * n + q]));
      inputs_[q] = q == rank ? input + static_cast<size_t>(r.begin) * elem : slot(g, q);
    }
    reduce::fold(output + static_cast<size_t>(r.begin) * elem, inputs_.data(), n, r.count, dtype, op);
  }
  return requests.wait_all();
}

}  // namespace kolo::algorithms
