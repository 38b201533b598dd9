#include "core/collective_args.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>

#include "common/check.h"
#include "kolo/kolo.h"

namespace kolo::core {
namespace {

static_assert(kMaxDims == KOLO_MAX_DIMS, "core/request.h's kMaxDims is kolo.h's KOLO_MAX_DIMS");

bool ranges_overlap(const void* a, size_t a_bytes, const void* b, size_t b_bytes) {
  auto x = reinterpret_cast<uintptr_t>(a);
  auto y = reinterpret_cast<uintptr_t>(b);
  return x < y + b_bytes && y < x + a_bytes;
}

bool ranges_overlap(const void* a, const void* b, size_t bytes) {
  return ranges_overlap(a, bytes, b, bytes);
}

Status check_name(const std::string& name) {
  if (name.empty()) return invalid_argument("name is empty");
  if (name.size() > KOLO_MAX_NAME_LENGTH)
    return invalid_argument("name is " + std::to_string(name.size()) + " bytes long; the limit is " +
                            std::to_string(KOLO_MAX_NAME_LENGTH));
  return Status::OK();
}

// Factors apply to every numeric dtype (integers: Note [Integer scale factors] in
// reduce_cpu.cc), not to bool; the CUDA kernels scale floating dtypes only.
Status check_scale(const std::string& prefix, const char* which, double factor,
                   const CollectiveArgs& a) {
  if (!std::isfinite(factor))
    return invalid_argument(prefix + which + " must be finite, got " + std::to_string(factor));
  if (factor == 1.0 || !is_valid(a.dtype) || is_floating(a.dtype)) return Status::OK();
  if (a.dtype == DataType::kBool)
    return invalid_argument(prefix + which + " " + std::to_string(factor) +
                            " needs a numeric dtype, not bool");
  if (a.device.kind == DeviceKind::kCuda)
    return Status(Code::kUnsupported,
                  prefix + which + " " + std::to_string(factor) + " on a CUDA " +
                      dtype_name(a.dtype) +
                      " tensor: kolo's CUDA kernels scale floating-point dtypes only (scale "
                      "integer tensors in host memory, or pass factor 1.0)");
  return Status::OK();
}

// dtype, device, and a non-negative element count that fits in bytes.
Status check_shape(const std::string& prefix, const CollectiveArgs& a, int64_t* elements) {
  if (!is_valid(a.dtype))
    return invalid_argument(prefix + "unknown dtype " + std::to_string(static_cast<int>(a.dtype)));
  if (!is_valid(a.device.kind))
    return invalid_argument(prefix + "unknown device kind " +
                            std::to_string(static_cast<int>(a.device.kind)));
  const char* what = a.collective == Collective::kAllreduce || a.collective == Collective::kBroadcast
                         ? "count" : "rows";
  if (a.rows < 0) return invalid_argument(prefix + "negative " + what + " " + std::to_string(a.rows));
  if (a.row_count < 1)
    return invalid_argument(prefix + "row size (elements per row) must be at least 1, got " +
                            std::to_string(a.row_count));
  const int64_t limit = std::numeric_limits<int64_t>::max() / static_cast<int64_t>(dtype_size(a.dtype));
  if (a.rows > limit / a.row_count)
    return invalid_argument(prefix + what + " " + std::to_string(a.rows) + " of " +
                            dtype_name(a.dtype) + " overflows the byte size");
  *elements = a.rows * a.row_count;
  return Status::OK();
}

Status check_buffers(const std::string& prefix, const void* in, const void* out, int64_t count,
                     DataType dtype, bool need_in, bool need_out) {
  if (count == 0) return Status::OK();
  if (need_in && in == nullptr) return invalid_argument(prefix + "input is NULL");
  if (need_out && out == nullptr) return invalid_argument(prefix + "output is NULL");
  if (need_in && need_out && in != out &&
      ranges_overlap(in, out, static_cast<size_t>(count) * dtype_size(dtype)))
    return invalid_argument(prefix + "input and output overlap without being equal");
  return Status::OK();
}

// kolo_allgather_into: host memory, an output of `size` times this rank's `n`
// elements that does not overlap the input.
Status check_into(const std::string& prefix, const CollectiveArgs& a, int64_t n, int size,
                  TensorParams* p) {
  if (a.device.kind != DeviceKind::kCpu)
    return Status(Code::kUnsupported, prefix + "an allgather into the caller's output takes host "
                                               "memory (for CUDA tensors: kolo_allgather_async)");
  if (n > 0 && a.output == nullptr) return invalid_argument(prefix + "output is NULL");
  const int64_t element = static_cast<int64_t>(dtype_size(a.dtype));
  if (n > std::numeric_limits<int64_t>::max() / element / size)
    return invalid_argument(prefix + "the output of " + std::to_string(size) + " x " +
                            std::to_string(n) + " elements overflows the byte size");
  const auto bytes = static_cast<size_t>(n * element);
  if (n > 0 && a.input != nullptr &&
      ranges_overlap(a.input, bytes, a.output, bytes * static_cast<size_t>(size)))
    return invalid_argument(prefix + "input and output overlap");
  p->into = true;
  return Status::OK();
}

Status check_reduction(const std::string& prefix, const CollectiveArgs& a) {
  if (!is_valid(a.op)) return invalid_argument(prefix + "unknown op " + std::to_string(static_cast<int>(a.op)));
  if (a.op == ReduceOp::kAverage && a.dtype == DataType::kBool)
    return invalid_argument(prefix + "average is not defined for bool");
  KOLO_RETURN_IF_ERROR_AS_IS(check_scale(prefix, "prescale", a.prescale, a));
  return check_scale(prefix, "postscale", a.postscale, a);
}

// The product of dims[from..], or -1 when it overflows int64.
int64_t product(const std::vector<int64_t>& dims, size_t from) {
  if (std::find(dims.begin() + static_cast<std::ptrdiff_t>(from), dims.end(), 0) != dims.end())
    return 0;
  int64_t n = 1;
  for (size_t i = from; i < dims.size(); ++i) {
    if (n > std::numeric_limits<int64_t>::max() / dims[i]) return -1;
    n *= dims[i];
  }
  return n;
}

std::string shown(int64_t n) { return n < 0 ? std::string("more than 2^63") : std::to_string(n); }

// A shape the caller gave agrees with the counts it gave: flat collectives hold
// product(dims) == rows elements; row collectives have dims[0] rows of
// product(dims[1..]) elements. Dimensions are non-negative (kolo.h checks them).
Status check_given_shape(const std::string& prefix, const CollectiveArgs& a,
                         const std::vector<int64_t>& dims) {
  const std::string shape = "shape " + format_shape(dims);
  if (a.collective == Collective::kAllreduce || a.collective == Collective::kBroadcast) {
    const int64_t n = product(dims, 0);
    if (n != a.rows)
      return invalid_argument(prefix + shape + " has " + shown(n) + " elements, but count is " +
                              std::to_string(a.rows));
    return Status::OK();
  }
  if (dims.empty())
    return invalid_argument(prefix + std::string(collective_name(a.collective)) +
                            " needs a tensor of at least one dimension, got a 0-dimensional "
                            "shape []");
  if (dims[0] != a.rows)
    return invalid_argument(prefix + shape + " has " + std::to_string(dims[0]) +
                            " rows (its first dimension), but rows is " + std::to_string(a.rows));
  const int64_t row = product(dims, 1);
  if (row != a.row_count)
    return invalid_argument(prefix + shape + " has rows of " + shown(row) +
                            " elements (the product of its other dimensions), but row_count is " +
                            std::to_string(a.row_count));
  return Status::OK();
}

// TensorParams::shapes' encoding of one shape, appended.
void append_shape(const std::vector<int64_t>& dims, std::vector<int64_t>* shapes) {
  shapes->push_back(static_cast<int64_t>(dims.size()));
  shapes->insert(shapes->end(), dims.begin(), dims.end());
}

// Note [Adasum's limits]
// Adasum combines whole tensors by recursive vector halving over pairs of ranks
// (src/algorithms/adasum.h), so — as in Horovod — the world size must be a power
// of two, and only floating dtypes have the dot products it needs. kolo's engine
// runs over the host point-to-point verbs: CUDA tensors are refused rather than
// staged through the host behind the caller's back. All three are known locally
// and the same on every rank, so every rank refuses the call itself.
Status check_adasum(const std::string& prefix, const CollectiveArgs& a, int world_size) {
  if (a.op != ReduceOp::kAdasum) return Status::OK();
  if (!is_floating(a.dtype))
    return unsupported(prefix + "op adasum needs a floating-point dtype (float16, bfloat16, "
                       "float32, float64), not " + dtype_name(a.dtype));
  if (a.device.kind != DeviceKind::kCpu)
    return unsupported(prefix + "op adasum runs on CPU tensors only: kolo's Adasum engine uses "
                       "the host point-to-point verbs, and this tensor is on " +
                       device_name(a.device) + " (copy it to the host first)");
  if (world_size < 1 || (world_size & (world_size - 1)) != 0)
    return unsupported(prefix + "op adasum needs a power-of-two number of ranks (as Horovod), "
                       "this world has " + std::to_string(world_size));
  return Status::OK();
}

uint64_t hash_names(const std::vector<std::string>& names) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (const std::string& n : names) {
    for (unsigned char c : n) h = (h ^ c) * 1099511628211ull;
    h = (h ^ 0xff) * 1099511628211ull;  // separator
  }
  return h;
}

// The collective each member of a group is; its checks are that collective's.
Collective member_collective(Collective group) {
  if (group == Collective::kGroupedAllgather) return Collective::kAllgather;
  if (group == Collective::kGroupedReducescatter) return Collective::kReducescatter;
  return Collective::kAllreduce;
}

// Member i of a group, checked as a tensor of its collective; *elements its size.
Status check_member(const std::string& prefix, const CollectiveArgs& a, size_t i,
                    const transport::Topology& topo, int64_t* elements) {
  CollectiveArgs m = a;
  m.collective = member_collective(a.collective);
  m.rows = a.members[i].rows;
  m.row_count = a.member_row_counts.empty() ? 1 : a.member_row_counts[i];
  KOLO_RETURN_IF_ERROR_AS_IS(check_shape(prefix, m, elements));
  if (!a.member_shapes.empty())
    KOLO_RETURN_IF_ERROR_AS_IS(check_given_shape(prefix, m, a.member_shapes[i]));
  const CollectiveArgs::Member& t = a.members[i];
  switch (m.collective) {
    case Collective::kAllgather:
      return check_buffers(prefix, t.input, nullptr, *elements, a.dtype, true, false);
    case Collective::kReducescatter: {
      if (*elements > 0 && t.input == nullptr) return invalid_argument(prefix + "input is NULL");
      const int64_t shard = shard_rows(m.rows, topo.rank, topo.size) * m.row_count;
      if (shard > 0 && t.output == nullptr) return invalid_argument(prefix + "output is NULL");
      return Status::OK();
    }
    default:
      return check_buffers(prefix, t.input, t.output, *elements, a.dtype, true, true);
  }
}

// A group: its members checked one by one, negotiated under one name. See Note
// [Grouped collectives] in executor_context.h.
Status make_grouped(const CollectiveArgs& a, const transport::Topology& topo, TensorEntry* e) {
  const std::string what = collective_name(a.collective);
  const bool rows = a.collective != Collective::kGroupedAllreduce;
  if (a.members.empty()) return invalid_argument(what + " of no tensors");
  if (a.member_names.size() != a.members.size())
    return invalid_argument(what + ": names and tensors differ in number");
  if (!a.member_shapes.empty() && a.member_shapes.size() != a.members.size())
    return invalid_argument(what + ": shapes and tensors differ in number");
  if (rows && a.member_row_counts.size() != a.members.size())
    return invalid_argument(what + ": row sizes and tensors differ in number");
  TensorParams& p = e->request.params;
  std::set<std::string> seen;
  int64_t total = 0;
  for (size_t i = 0; i < a.members.size(); ++i) {
    KOLO_RETURN_IF_ERROR_AS_IS(check_name(a.member_names[i]));
    const std::string prefix = "tensor '" + a.member_names[i] + "' (grouped): ";
    if (!seen.insert(a.member_names[i]).second)
      return invalid_argument(prefix + "appears twice in the group");
    int64_t n = 0;
    KOLO_RETURN_IF_ERROR_AS_IS(check_member(prefix, a, i, topo, &n));
    if (!a.member_shapes.empty()) append_shape(a.member_shapes[i], &p.shapes);
    p.member_counts.push_back(n);
    if (rows) p.member_row_counts.push_back(a.member_row_counts[i]);
    e->members.push_back({a.members[i].input, a.members[i].output, n});
    if (total > std::numeric_limits<int64_t>::max() / 16 - n)
      return invalid_argument(prefix + "the group's total size overflows");
    total += n;
  }
  if (a.collective == Collective::kGroupedReducescatter && a.op != ReduceOp::kSum &&
      a.op != ReduceOp::kAverage)
    return invalid_argument(what + " takes op sum or average, not " + op_name(a.op));
  if (a.collective != Collective::kGroupedAllgather) {
    KOLO_RETURN_IF_ERROR_AS_IS(check_reduction(what + ": ", a));
    KOLO_RETURN_IF_ERROR_AS_IS(check_adasum(what + ": ", a, topo.size));
    p.op = a.op;
    p.prescale = a.prescale;
    p.postscale = a.postscale;
    p.deterministic = a.deterministic && a.collective == Collective::kGroupedAllreduce;
  }
  // The grouped allreduce keeps its name ("group:"); the others say what they are.
  const std::string kind = rows ? what + " group:" : std::string("group:");
  e->request.name = kind + a.member_names[0] + ":" + std::to_string(a.members.size());
  p.count = total;
  p.names_hash = hash_names(a.member_names);
  return Status::OK();
}

}  // namespace

int64_t shard_rows(int64_t rows, int rank, int size) {
  return rows / size + (rank < rows % size ? 1 : 0);
}

namespace {

// make_entry's checks of one named tensor. Their messages leave out the tensor's
// name: make_entry puts it in front of a failure's message, so that a call that
// passes builds no string.
Status fill_params(const CollectiveArgs& a, const transport::Topology& topo, TensorEntry* e) {
  static const std::string prefix;  // empty: make_entry puts the name in front
  TensorParams& p = e->request.params;
  int64_t n = 0;
  KOLO_RETURN_IF_ERROR_AS_IS(check_shape(prefix, a, &n));
  if (a.shape) {
    KOLO_RETURN_IF_ERROR_AS_IS(check_given_shape(prefix, a, *a.shape));
    append_shape(*a.shape, &p.shapes);
  }
  p.count = n;
  p.row_count = a.row_count;
  switch (a.collective) {
    case Collective::kAllreduce:
      KOLO_RETURN_IF_ERROR_AS_IS(check_reduction(prefix, a));
      KOLO_RETURN_IF_ERROR_AS_IS(check_adasum(prefix, a, topo.size));
      p.op = a.op;
      p.prescale = a.prescale;
      p.postscale = a.postscale;
      p.deterministic = a.deterministic;
      return check_buffers(prefix, a.input, a.output, n, a.dtype, true, true);
    case Collective::kAllgather:
      if (a.into) KOLO_RETURN_IF_ERROR_AS_IS(check_into(prefix, a, n, topo.size, &p));
      return check_buffers(prefix, a.input, nullptr, n, a.dtype, true, false);
    case Collective::kBroadcast:
      if (a.root < 0 || a.root >= topo.size)
        return invalid_argument(prefix + "root " + std::to_string(a.root) + " is not a rank (size " +
                                std::to_string(topo.size) + ")");
      p.root = a.root;
      return check_buffers(prefix, a.input, a.output, n, a.dtype, topo.rank == a.root, true);
    case Collective::kAlltoall: {
      if (a.send_rows == nullptr) {
        if (a.rows % topo.size != 0)
          return invalid_argument(prefix + "rows " + std::to_string(a.rows) +
                                  " do not split evenly over " + std::to_string(topo.size) +
                                  " ranks; pass splits");
        p.send_rows.assign(topo.size, a.rows / topo.size);
      } else {
        p.send_rows.assign(a.send_rows, a.send_rows + topo.size);
        int64_t sum = 0;
        for (int64_t s : p.send_rows) {
          if (s < 0) return invalid_argument(prefix + "negative split " + std::to_string(s));
          sum += s;
        }
        if (sum != a.rows)
          return invalid_argument(prefix + "splits add up to " + std::to_string(sum) +
                                  " rows, but the input has " + std::to_string(a.rows));
      }
      return check_buffers(prefix, a.input, nullptr, n, a.dtype, true, false);
    }
    case Collective::kReducescatter: {
      if (a.op != ReduceOp::kSum && a.op != ReduceOp::kAverage)
        return invalid_argument(prefix + "reducescatter takes op sum or average, not " + op_name(a.op));
      KOLO_RETURN_IF_ERROR_AS_IS(check_reduction(prefix, a));
      p.op = a.op;
      p.prescale = a.prescale;
      p.postscale = a.postscale;
      const int64_t shard = shard_rows(a.rows, topo.rank, topo.size) * a.row_count;
      if (n > 0 && a.input == nullptr) return invalid_argument(prefix + "input is NULL");
      if (shard > 0 && a.output == nullptr) return invalid_argument(prefix + "output is NULL");
      return Status::OK();
    }
    default:
      return internal_error("unexpected collective");
  }
}

}  // namespace

Status make_entry(CollectiveArgs&& a, const transport::Topology& topo, TensorEntry* e) {
  TensorParams& p = e->request.params;
  p.collective = a.collective;
  p.dtype = a.dtype;
  p.device_kind = a.device.kind;
  e->input = a.input;
  e->output = a.output;
  e->device = a.device;
  if (is_group(a.collective)) return make_grouped(a, topo, e);
  KOLO_RETURN_IF_ERROR_AS_IS(check_name(a.name));
  if (a.collective != Collective::kBarrier && a.collective != Collective::kJoin) {
    Status checked = fill_params(a, topo, e);
    if (!checked.ok()) return Status(checked.code(), "tensor '" + a.name + "': " + checked.message());
  }
  e->request.name = std::move(a.name);  // the caller's string, not a copy of it
  return Status::OK();
}

}  // namespace kolo::core
