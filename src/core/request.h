// What a rank asks for, and what the negotiation answers.
//
// A Request is one rank's submission of one named tensor; a Response is the
// negotiated verdict for a name, identical on every rank: go ahead with these
// parameters, or fail with this status and message. Both travel through the
// control plane encoded by wire.h.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/collective.h"
#include "common/dtype.h"
#include "common/status.h"

namespace kolo::core {


// Allreduce-like: reduced with the fusion buffer, and a joined rank contributes
// zeros to them (see Note [Join]).
inline bool is_allreduce(Collective c) {
  return c == Collective::kAllreduce || c == Collective::kGroupedAllreduce;
}
// Per-rank shapes differ (allgather rows, alltoall splits): the response carries
// every rank's sizes, and the response cache compares each rank's own parameters
// (Note [Caching per-rank sizes] in response_cache.h).
inline bool has_per_rank_sizes(Collective c) {
  return c == Collective::kAllgather || c == Collective::kAlltoall ||
         c == Collective::kGroupedAllgather;
}
// Everything but barrier and join (which must reach rank 0's table each time).
inline bool is_cacheable(Collective c) {
  return c != Collective::kBarrier && c != Collective::kJoin;
}
// Several named tensors negotiated as one unit (one name in the tables, see
// Note [Grouped collectives] in executor_context.h).
inline bool is_group(Collective c) {
  return c == Collective::kGroupedAllreduce || c == Collective::kGroupedAllgather ||
         c == Collective::kGroupedReducescatter;
}


// "[2, 3]"; "[]" for a scalar.
std::string format_shape(const std::vector<int64_t>& dims);

// Everything ranks must agree on for a name. See Note [What ranks must agree on].
struct TensorParams {
  Collective collective = Collective::kAllreduce;
  DataType dtype = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  DeviceKind device_kind = DeviceKind::kCpu;
  int64_t count = 0;
  double prescale = 1.0;
  double postscale = 1.0;
  int32_t root = -1;  // rooted collectives only; -1 otherwise
  // Elements per row along the first dimension (allgather, alltoall,
  // reducescatter; count = rows * row_count). 1 otherwise.
  int64_t row_count = 1;
  std::vector<int64_t> send_rows;      // alltoall: rows sent to each rank, in rank order
  std::vector<int64_t> member_counts;  // groups: each member's element count
  // Grouped allgather and reducescatter: each member's row size (elements per row).
  std::vector<int64_t> member_row_counts;
  // Groups: a hash of the member names, so ranks agree on membership.
  uint64_t names_hash = 0;
  // The shapes the caller gave, each as ndim then the dims ([2, 3] is {2, 2, 3});
  // a grouped call's members one after the other. Empty: none given. See Note
  // [Negotiated shapes].
  std::vector<int64_t> shapes;
  // Allreduces: reduced in rank order (Note [Deterministic reductions] in
  // transport/transport.h); the caller's flag or KOLO_DETERMINISTIC.
  bool deterministic = false;
  // Allgathers: into the caller's output (kolo_allgather_into), which needs the
  // same rows from every rank; false: into an output kolo allocates.
  bool into = false;

  bool operator==(const TensorParams& o) const {
    return collective == o.collective && dtype == o.dtype && op == o.op &&
           device_kind == o.device_kind && count == o.count && prescale == o.prescale &&
           postscale == o.postscale && root == o.root && row_count == o.row_count &&
           send_rows == o.send_rows && member_counts == o.member_counts &&
           names_hash == o.names_hash && shapes == o.shapes &&
           member_row_counts == o.member_row_counts && deterministic == o.deterministic &&
           into == o.into;
  }
  bool operator!=(const TensorParams& o) const { return !(*this == o); }

  size_t bytes() const { return static_cast<size_t>(count) * dtype_size(dtype); }
};

struct Request {
  std::string name;
  TensorParams params;
};

struct Response {
  std::string name;
  TensorParams params;          // the agreed parameters (rank 0's on error)
  Code code = Code::kOk;        // kOk: execute; otherwise complete with this error
  std::string message;          // why, for errors
  // allgather: the rows each rank contributed; grouped allgather: member-major,
  // [m * size + r] is member m's rows from rank r.
  std::vector<int64_t> rows_per_rank;
  std::vector<int64_t> rows_matrix;    // alltoall: rows sent, size x size, [source][destination]
  int32_t last_joined = -1;            // join: the last rank to join
};

// Note [What ranks must agree on]
// A name is the identity of a tensor across ranks. Everything in TensorParams is
// compared on rank 0 when the last rank's request for the name arrives; any
// difference fails the name on every rank with KOLO_ERR_MISMATCH and a message
// that names the field and the value on each rank. The device *index* is not
// compared (rank 0 may use GPU 0 while rank 1 uses GPU 1); the device kind is.

// Note [Negotiated shapes]
// Horovod refuses [2, 3] on one rank and [3, 2] on another although the counts
// agree, so a shape given (kolo.h's kolo_options_t; the Python package always
// gives one) is part of TensorParams and compared in full: ndim and every
// dimension, except that allgather and alltoall compare only ndim and dims[1..]
// (ranks contribute different numbers of rows). A submission without a shape is
// compared on counts as before, and "no shape" is a value of its own: a shaped and
// an unshaped submission of one name mismatch. Matching an unshaped rank to any
// shape of equal count would make the agreed parameters depend on which rank
// rank 0 saw first, and the response cache (which compares parameters whole)
// would see every later submission as stale; every rank runs the same code in
// practice, so the strict rule costs nothing and says what differs.

// The dims of each shape in `shapes` (TensorParams::shapes); false when the
// encoding is not well formed (ndim outside 0..kMaxDims, or values missing).
constexpr int kMaxDims = 16;  // KOLO_MAX_DIMS
bool split_shapes(const std::vector<int64_t>& shapes, std::vector<std::vector<int64_t>>* out);

// Compares the requests for one name, one per rank in rank order (a rank that has
// joined is absent: nullopt). Returns the OK response — with the first present
// rank's parameters and, for allgather and alltoall, every rank's sizes — or a
// mismatch response whose message names the tensor, the first field that differs,
// and the value on each rank.
Response validate(const std::vector<std::optional<Request>>& per_rank);

}  // namespace kolo::core
