#include "core/request.h"

#include <functional>
#include <map>
#include <sstream>

namespace kolo::core {

const char* collective_name(Collective c) {
  switch (c) {
    case Collective::kAllreduce: return "allreduce";
  }
  return "invalid";
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

struct Field {
  const char* name;
  std::function<std::string(const TensorParams&)> show;
};

const std::vector<Field>& fields() {
  static const std::vector<Field> kFields = {
      {"collective", [](const TensorParams& p) { return std::string(collective_name(p.collective)); }},
      {"device", [](const TensorParams& p) { return std::string(p.device == DeviceKind::kCuda ? "cuda" : "cpu"); }},
      {"dtype", [](const TensorParams& p) { return dtype_name(p.dtype); }},
      {"count", [](const TensorParams& p) { return std::to_string(p.count); }},
      {"op", [](const TensorParams& p) { return op_name(p.op); }},
      {"prescale", [](const TensorParams& p) { return format_double(p.prescale); }},
      {"postscale", [](const TensorParams& p) { return format_double(p.postscale); }},
      {"root", [](const TensorParams& p) { return std::to_string(p.root); }},
  };
  return kFields;
}

}  // namespace

Response validate(const std::vector<Request>& per_rank) {
  Response response;
  response.name = per_rank.at(0).name;
  response.params = per_rank[0].params;
  for (const Field& field : fields()) {
    std::vector<std::string> values;
    values.reserve(per_rank.size());
    bool differs = false;
    for (const Request& r : per_rank) {
      values.push_back(field.show(r.params));
      differs |= values.back() != values.front();
    }
    if (differs) {
      response.code = Code::kMismatch;
      response.message = "tensor '" + response.name + "': ranks disagree on " + field.name +
                         ": " + describe_values(values);
      return response;
    }
  }
  return response;
}

}  // namespace kolo::core
