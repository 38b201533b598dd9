#include "core/request.h"

#include <functional>
#include <map>
#include <sstream>

namespace kolo::core {

std::string format_shape(const std::vector<int64_t>& dims) {
  std::string out = "[";
  for (size_t i = 0; i < dims.size(); ++i) out += (i ? ", " : "") + std::to_string(dims[i]);
  return out + "]";
}

bool split_shapes(const std::vector<int64_t>& shapes, std::vector<std::vector<int64_t>>* out) {
  out->clear();
  for (size_t i = 0; i < shapes.size();) {
    const int64_t ndim = shapes[i++];
    if (ndim < 0 || ndim > kMaxDims || shapes.size() - i < static_cast<size_t>(ndim)) return false;
    out->emplace_back(shapes.begin() + static_cast<std::ptrdiff_t>(i),
                      shapes.begin() + static_cast<std::ptrdiff_t>(i + static_cast<size_t>(ndim)));
    i += static_cast<size_t>(ndim);
  }
  return true;
}

namespace {

std::string format_double(double v) {
  std::ostringstream os;
  os.precision(17);
  os << v;
  return os.str();
}

// "rank 0: float32, rank 1: float64" when every rank differs or the world is small;
// grouped as "float32 on ranks 0,2; float64 on rank 1" otherwise.
std::string describe_values(const std::vector<std::string>& values) {
  std::map<std::string, std::vector<int>> groups;
  std::vector<std::string> order;
  for (size_t r = 0; r < values.size(); ++r) {
    if (groups.find(values[r]) == groups.end()) order.push_back(values[r]);
    groups[values[r]].push_back(static_cast<int>(r));
  }
  std::ostringstream os;
  for (size_t i = 0; i < order.size(); ++i) {
    const std::vector<int>& ranks = groups[order[i]];
    if (i > 0) os << "; ";
    os << order[i] << " on rank" << (ranks.size() > 1 ? "s " : " ");
    for (size_t k = 0; k < ranks.size(); ++k) os << (k ? "," : "") << ranks[k];
  }
  return os.str();
}

std::string join_values(const std::vector<int64_t>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + std::to_string(v[i]);
  return out + "]";
}

struct Field {
  const char* name;
  bool (*applies)(Collective);
  std::function<std::string(const TensorParams&)> show;
  // What ranks must agree on, when not all of what is shown (null: show).
  std::function<std::string(const TensorParams&)> key = nullptr;
};

// The shapes given, for messages: "[2, 3]", "(no shape)"; a group's as a list.
std::string show_shapes(const TensorParams& p) {
  if (p.shapes.empty()) return "(no shape)";
  std::vector<std::vector<int64_t>> each;
  if (!split_shapes(p.shapes, &each)) return "(bad shape)";
  if (!is_group(p.collective)) return format_shape(each.front());
  std::string out = "[";
  for (size_t i = 0; i < each.size(); ++i) out += (i ? ", " : "") + format_shape(each[i]);
  return out + "]";
}

// Allgather and alltoall (a group's members alike): ranks agree on ndim and
// dims[1..] of each shape only.
std::string shape_past_rows(const TensorParams& p) {
  std::vector<std::vector<int64_t>> each;
  if (p.shapes.empty() || !split_shapes(p.shapes, &each)) return show_shapes(p);
  std::string out;
  for (const auto& dims : each) {
    if (dims.empty()) {
      out += "0:[];";
      continue;
    }
    const std::vector<int64_t> rest(dims.begin() + 1, dims.end());
    out += std::to_string(dims.size()) + ":" + format_shape(rest) + ";";
  }
  return out;
}

bool always(Collective) { return true; }
bool has_dtype(Collective c) { return c != Collective::kBarrier && c != Collective::kJoin; }
bool is_reducescatter(Collective c) {
  return c == Collective::kReducescatter || c == Collective::kGroupedReducescatter;
}
bool has_count(Collective c) {
  return is_allreduce(c) || c == Collective::kBroadcast || is_reducescatter(c);
}
bool has_rows(Collective c) {
  return (has_per_rank_sizes(c) || c == Collective::kReducescatter) && !is_group(c);
}
bool has_op(Collective c) { return is_allreduce(c) || is_reducescatter(c); }
bool has_root(Collective c) { return c == Collective::kBroadcast; }
bool group_of_counts(Collective c) { return is_group(c) && has_count(c); }
bool group_of_rows(Collective c) { return is_group(c) && c != Collective::kGroupedAllreduce; }
bool is_allgather(Collective c) { return c == Collective::kAllgather; }

// An allgather's output: kolo's, or the caller's, which needs the same rows from
// every rank (kolo_allgather_into): those rows are part of what ranks agree on.
std::string show_output(const TensorParams& p) {
  if (!p.into) return "kolo's";
  return "the caller's, for " + std::to_string(p.row_count > 0 ? p.count / p.row_count : 0) +
         " rows from every rank";
}

const std::vector<Field>& fields() {
  static const std::vector<Field> kFields = {
      {"collective", always, [](const TensorParams& p) { return std::string(collective_name(p.collective)); }},
      {"device", always, [](const TensorParams& p) { return std::string(p.device_kind == DeviceKind::kCuda ? "cuda" : "cpu"); }},
      {"dtype", has_dtype, [](const TensorParams& p) { return dtype_name(p.dtype); }},
      {"shape", has_dtype, show_shapes,
       [](const TensorParams& p) {
         return has_per_rank_sizes(p.collective) ? shape_past_rows(p) : show_shapes(p);
       }},
      {"count", has_count, [](const TensorParams& p) { return std::to_string(p.count); }},
      {"row size (trailing dimensions)", has_rows, [](const TensorParams& p) { return std::to_string(p.row_count); }},
      {"op", has_op, [](const TensorParams& p) { return op_name(p.op); }},
      {"prescale", has_op, [](const TensorParams& p) { return format_double(p.prescale); }},
      {"postscale", has_op, [](const TensorParams& p) { return format_double(p.postscale); }},
      {"deterministic", is_allreduce, [](const TensorParams& p) { return std::string(p.deterministic ? "yes" : "no"); }},
      {"root", has_root, [](const TensorParams& p) { return std::to_string(p.root); }},
      {"output", is_allgather, show_output},
      {"group member counts", group_of_counts, [](const TensorParams& p) { return join_values(p.member_counts); }},
      {"group member row sizes", group_of_rows, [](const TensorParams& p) { return join_values(p.member_row_counts); }},
      {"group member names", is_group, [](const TensorParams& p) { return std::to_string(p.names_hash); }},
  };
  return kFields;
}

}  // namespace

Response validate(const std::vector<std::optional<Request>>& per_rank) {
  const Request* first = nullptr;
  for (const auto& r : per_rank)
    if (r && !first) first = &*r;
  Response response;
  response.name = first->name;
  response.params = first->params;
  for (const Field& field : fields()) {
    // The collective is compared first, so later fields may trust it.
    if (!field.applies(response.params.collective)) continue;
    const auto& key = field.key ? field.key : field.show;
    std::vector<std::string> values;
    bool differs = false;
    for (const auto& r : per_rank) {
      values.push_back(r ? field.show(r->params) : std::string("(joined)"));
      if (r) differs |= key(r->params) != key(first->params);
    }
    if (differs) {
      response.code = Code::kMismatch;
      response.message = "tensor '" + response.name + "': ranks disagree on " + field.name +
                         ": " + describe_values(values);
      return response;
    }
  }
  const Collective c = response.params.collective;
  if (c == Collective::kAllgather) {
    for (const auto& r : per_rank) response.rows_per_rank.push_back(r->params.count / r->params.row_count);
  } else if (c == Collective::kGroupedAllgather) {
    const TensorParams& p = response.params;  // row sizes agree (compared above)
    for (size_t m = 0; m < p.member_row_counts.size(); ++m)
      for (const auto& r : per_rank)
        response.rows_per_rank.push_back(r->params.member_counts.at(m) / p.member_row_counts[m]);
  } else if (c == Collective::kAlltoall) {
    for (const auto& r : per_rank)
      response.rows_matrix.insert(response.rows_matrix.end(), r->params.send_rows.begin(),
                                  r->params.send_rows.end());
  }
  return response;
}

}  // namespace kolo::core
