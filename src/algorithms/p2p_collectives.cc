// P2PCollectives: argument checks, the CollectiveView forms, and the small
// cases; the algorithms are in p2p_ring.cc, p2p_broadcast.cc and p2p_alltoall.cc.
#include "algorithms/p2p_collectives.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "algorithms/p2p_schedule.h"
#include "common/check.h"

namespace kolo::algorithms {
namespace {

using transport::CollectiveOp;
using transport::CollectiveView;

std::string counts_string(const std::vector<int64_t>& counts) {
  std::string s = "[";
  for (size_t i = 0; i < counts.size() && i < 16; ++i) s += (i ? "," : "") + std::to_string(counts[i]);
  return s + (counts.size() > 16 ? ",...]" : "]");
}

// One value >= 0 per rank.
Status check_per_rank(const char* what, const char* field, const std::vector<int64_t>& v, int size) {
  bool ok = v.size() == static_cast<size_t>(size);
  for (int64_t c : v) ok = ok && c >= 0;
  if (ok) return Status::OK();
  return invalid_argument(std::string(what) + ": " + field + " " + counts_string(v) +
                          " is not one value >= 0 for each of " + std::to_string(size) + " ranks");
}

Status check_dtype(const char* what, DataType dtype) {
  if (is_valid(dtype)) return Status::OK();
  return invalid_argument(std::string(what) + ": invalid dtype " + dtype_name(dtype));
}

Status check_buffer(const char* what, const char* name, const void* p, int64_t count) {
  if (p != nullptr || count == 0) return Status::OK();
  return invalid_argument(std::string(what) + ": " + name + " is null for " + std::to_string(count) +
                          " elements");
}

// The extent of a layout: the end of its last-ending block, in elements.
int64_t extent(const std::vector<int64_t>& counts, const std::vector<int64_t>& displs) {
  int64_t end = 0;
  for (size_t r = 0; r < counts.size(); ++r) {
    if (counts[r] > 0) end = std::max(end, displs[r] + counts[r]);
  }
  return end;
}

bool overlaps(const void* a, size_t a_bytes, const void* b, size_t b_bytes) {
  const char* x = static_cast<const char*>(a);
  const char* y = static_cast<const char*>(b);
  return a_bytes > 0 && b_bytes > 0 && x < y + b_bytes && y < x + a_bytes;
}

}  // namespace

P2PCollectives::P2PCollectives(transport::PointToPoint& p2p, RingOptions options)
    : p2p_(p2p), options_(options) {}

int64_t P2PCollectives::segment_elems(size_t elem) const {
  return std::max<int64_t>(1, static_cast<int64_t>(options_.segment_bytes / elem));
}

const char* P2PCollectives::unaliased(const void* input, size_t bytes, const void* output,
                                      size_t out_bytes) {
  const char* in = static_cast<const char*>(input);
  if (!overlaps(input, bytes, output, out_bytes)) return in;
  input_copy_.assign(in, in + bytes);  // grow-only: assign keeps the capacity
  return input_copy_.data();
}

Status P2PCollectives::allgatherv(const void* input, void* output,
                                  const std::vector<int64_t>& counts,
                                  const std::vector<int64_t>& displs, DataType dtype) {
  const char* what = "p2p allgather";
  const int size = p2p_.size(), rank = p2p_.rank();
  KOLO_RETURN_IF_ERROR_AS_IS(check_dtype(what, dtype));
  KOLO_RETURN_IF_ERROR_AS_IS(check_per_rank(what, "counts", counts, size));
  KOLO_RETURN_IF_ERROR_AS_IS(check_per_rank(what, "displacements", displs, size));
  KOLO_RETURN_IF_ERROR_AS_IS(check_buffer(what, "input", input, counts[rank]));
  KOLO_RETURN_IF_ERROR_AS_IS(check_buffer(what, "output", output, extent(counts, displs)));
  const size_t elem = dtype_size(dtype);
  char* out = static_cast<char*>(output);
  char* own = out + static_cast<size_t>(displs[rank]) * elem;
  if (input != own && counts[rank] > 0)
    std::memmove(own, input, static_cast<size_t>(counts[rank]) * elem);
  if (size == 1) return Status::OK();
  return ring_pass(false, out, out, counts, displs, dtype, ReduceOp::kSum);
}

Status P2PCollectives::reducescatter(const void* input, void* output,
                                     const std::vector<int64_t>& counts, DataType dtype,
                                     ReduceOp op) {
  const char* what = "p2p reducescatter";
  const int size = p2p_.size(), rank = p2p_.rank();
  KOLO_RETURN_IF_ERROR_AS_IS(check_dtype(what, dtype));
  if (!is_elementwise(op))
    return invalid_argument(std::string(what) + ": op must be sum, min, max or product, not " +
                            op_name(op));
  KOLO_RETURN_IF_ERROR_AS_IS(check_per_rank(what, "counts", counts, size));
  const int64_t total = prefix_sums(counts, &displs_);
  KOLO_RETURN_IF_ERROR_AS_IS(check_buffer(what, "input", input, total));
  KOLO_RETURN_IF_ERROR_AS_IS(check_buffer(what, "output", output, counts[rank]));
  const size_t elem = dtype_size(dtype);
  const size_t mine = static_cast<size_t>(counts[rank]) * elem;
  if (size == 1) {
    if (mine > 0 && input != output) std::memmove(output, input, mine);
    return Status::OK();
  }
  const char* in = unaliased(input, static_cast<size_t>(total) * elem, output, mine);
  return ring_pass(true, in, static_cast<char*>(output), counts, displs_, dtype, op);
}

Status P2PCollectives::check(CollectiveOp op, const CollectiveView& view, int size) {
  const std::string what = std::string("p2p ") + collective_name(op);
  if (view.device.kind != DeviceKind::kCpu)
    return unsupported(what + ": CPU memory only, not " + device_name(view.device));
  if (!is_valid(view.dtype)) return unsupported(what + ": invalid dtype " + dtype_name(view.dtype));
  switch (op) {
    case CollectiveOp::kBroadcast:
      if (view.root < 0 || view.root >= size || view.count < 0)
        return invalid_argument(what + ": root " + std::to_string(view.root) + " count " +
                                std::to_string(view.count) + " in a world of " + std::to_string(size));
      return Status::OK();
    case CollectiveOp::kAlltoall:
      KOLO_RETURN_IF_ERROR_AS_IS(check_per_rank(what.c_str(), "send_counts", view.send_counts, size));
      return check_per_rank(what.c_str(), "recv_counts", view.recv_counts, size);
    case CollectiveOp::kReducescatter:
      if (!is_elementwise(view.reduction.op))
        return unsupported(what + ": sum, min, max or product, not " + op_name(view.reduction.op) +
                           " (decide_reduction turns average into sum)");
      return check_per_rank(what.c_str(), "recv_counts", view.recv_counts, size);
    case CollectiveOp::kAllgather:
      return check_per_rank(what.c_str(), "recv_counts", view.recv_counts, size);
  }
  return internal_error(what + ": unknown collective");
}

Status P2PCollectives::run(CollectiveOp op, const CollectiveView& view) {
  KOLO_RETURN_IF_ERROR_AS_IS(check(op, view, p2p_.size()));
  switch (op) {
    case CollectiveOp::kAllgather:
      prefix_sums(view.recv_counts, &view_rdispls_);
      return allgatherv(view.input, view.output, view.recv_counts, view_rdispls_, view.dtype);
    case CollectiveOp::kBroadcast: {
      const size_t bytes = static_cast<size_t>(view.count) * dtype_size(view.dtype);
      KOLO_RETURN_IF_ERROR_AS_IS(check_buffer("p2p broadcast", "output", view.output, view.count));
      if (p2p_.rank() == view.root && view.input != view.output && bytes > 0) {
        KOLO_RETURN_IF_ERROR_AS_IS(check_buffer("p2p broadcast", "input", view.input, view.count));
        std::memmove(view.output, view.input, bytes);
      }
      return broadcast(view.output, view.count, view.dtype, view.root);
    }
    case CollectiveOp::kAlltoall:
      prefix_sums(view.send_counts, &view_displs_);
      prefix_sums(view.recv_counts, &view_rdispls_);
      return alltoallv(view.input, view.send_counts, view_displs_, view.output, view.recv_counts,
                       view_rdispls_, view.dtype);
    case CollectiveOp::kReducescatter:
      return reducescatter(view.input, view.output, view.recv_counts, view.dtype, view.reduction.op);
  }
  return internal_error("p2p: unknown collective");
}

}  // namespace kolo::algorithms
