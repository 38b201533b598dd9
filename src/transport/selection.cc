#include "transport/selection.h"

#include <algorithm>
#include <cctype>
#include <sstream>

#include "common/check.h"

namespace kolo::transport {
namespace {

constexpr size_t kNoLimit = std::numeric_limits<size_t>::max();

const char* const kKindNames[kNumKinds] = {"allreduce", "adasum",   "allgather",
                                           "broadcast", "alltoall", "reducescatter"};

// Every kind but adasum: what '*' means (Adasum is an op's engine, never a path
// choice: Note [Adasum has an engine of its own] in registry.cc).
constexpr uint32_t kStarKinds = ((1u << kNumKinds) - 1) & ~(1u << static_cast<int>(Kind::kAdasum));

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  std::string part;
  std::istringstream in(s);
  while (std::getline(in, part, sep)) parts.push_back(trim(part));
  return parts;
}

std::vector<std::string> words(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

bool parse_bytes(const std::string& text, size_t* out) {
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text[0]))) return false;
  size_t used = 0;
  unsigned long long value = 0;
  try {
    value = std::stoull(text, &used);
  } catch (...) {
    return false;
  }
  std::string unit = text.substr(used);
  size_t scale = 1;
  if (unit == "K" || unit == "k") scale = size_t{1} << 10;
  else if (unit == "M" || unit == "m") scale = size_t{1} << 20;
  else if (unit == "G" || unit == "g") scale = size_t{1} << 30;
  else if (!unit.empty()) return false;
  if (value > kNoLimit / scale) return false;
  *out = static_cast<size_t>(value) * scale;
  return true;
}

std::string bytes_text(size_t b) {
  if (b != 0 && b % (size_t{1} << 30) == 0) return std::to_string(b >> 30) + "G";
  if (b != 0 && b % (size_t{1} << 20) == 0) return std::to_string(b >> 20) + "M";
  if (b != 0 && b % (size_t{1} << 10) == 0) return std::to_string(b >> 10) + "K";
  return std::to_string(b);
}

Status parse_kinds(const std::string& text, uint32_t* out) {
  if (text == "*") {
    *out = kStarKinds;
    return Status::OK();
  }
  *out = 0;
  for (const std::string& name : split(text, '|')) {
    int k = 0;
    while (k < kNumKinds && name != kKindNames[k]) ++k;
    if (k == kNumKinds)
      return invalid_argument("\"" + name + "\" is not a kind of call (allreduce, adasum, "
                              "allgather, broadcast, alltoall, reducescatter or *)");
    *out |= 1u << k;
  }
  return Status::OK();
}

Status parse_sizes(const std::string& text, Rule* rule) {
  if (text == "*") return Status::OK();
  const size_t dash = text.find('-');
  const std::string bad = "\"" + text + "\" is not a size range (N-M, N- or *; K, M, G suffixes)";
  if (dash == std::string::npos) return invalid_argument(bad);
  if (!parse_bytes(text.substr(0, dash), &rule->min_bytes)) return invalid_argument(bad);
  const std::string upper = text.substr(dash + 1);
  if (!upper.empty() && !parse_bytes(upper, &rule->max_bytes)) return invalid_argument(bad);
  if (rule->max_bytes <= rule->min_bytes) return invalid_argument(bad + ": it is empty");
  return Status::OK();
}

Status parse_rule(const std::string& text, const std::vector<std::string>& known, Rule* rule) {
  const size_t colon = text.find(':');
  if (colon == std::string::npos)
    return invalid_argument("no ':' between the call and the transports");
  const std::vector<std::string> call = words(text.substr(0, colon));
  if (call.size() != 4)
    return invalid_argument("the call has " + std::to_string(call.size()) +
                            " fields, not 4 (kinds memory sizes span)");
  KOLO_RETURN_IF_ERROR_AS_IS(parse_kinds(call[0], &rule->kinds));
  if (call[1] == "host") rule->memory = Memory::kHost;
  else if (call[1] == "device") rule->memory = Memory::kDevice;
  else if (call[1] != "*")
    return invalid_argument("\"" + call[1] + "\" is not a memory (host, device or *)");
  KOLO_RETURN_IF_ERROR_AS_IS(parse_sizes(call[2], rule));
  if (call[3] == "node") rule->span = Span::kOneNode;
  else if (call[3] == "nodes") rule->span = Span::kNodes;
  else if (call[3] == "nodes+") rule->span = Span::kNodesShared;
  else if (call[3] != "*")
    return invalid_argument("\"" + call[3] + "\" is not a span (node, nodes, nodes+ or *)");
  std::vector<std::string> names = split(text.substr(colon + 1), ',');
  if (!names.empty()) {
    std::vector<std::string> last = words(names.back());
    if (last.size() == 2 && last[1] == "only") {
      rule->only = true;
      names.back() = last[0];
    }
  }
  for (const std::string& name : names) {
    if (name.empty() || name.find(' ') != std::string::npos)
      return invalid_argument("\"" + name + "\" is not a transport name");
    if (!known.empty() && std::find(known.begin(), known.end(), name) == known.end()) {
      std::string accepted;
      for (const std::string& k : known) accepted += (accepted.empty() ? "" : ", ") + k;
      return invalid_argument("\"" + name + "\" is not a transport (known: " + accepted + ")");
    }
    rule->transports.push_back(name);
  }
  if (rule->transports.empty()) return invalid_argument("no transport after ':'");
  return Status::OK();
}

bool is_host_allreduce(const Rule& r) {
  return (r.kinds & (1u << static_cast<int>(Kind::kAllreduce))) != 0 && r.memory != Memory::kDevice;
}

// Note [Auto order]
// ~~~~~~~~~~~~~~~~~
// The default table, and why each rule is what it is (measurements:
// docs/perf/README.md, "Design measurements"):
// - Device buckets: "nccl"; it is the only transport that reduces device memory
//   without staging it through the host.
// - Host memory, one node: "shm" first at every size and for every collective:
//   no message and no MPI call, ~4.5 bytes of memory traffic per byte of bucket
//   at 2 ranks; it beats the native path from a few KiB up and ties below.
// - Host allreduce across nodes under 64 KiB is latency-bound: the native
//   MPI_Allreduce (log2(n) steps) before "hierarchical"; the ring pays 2(n-1)
//   latencies whatever the size. 64 KiB is the textbook crossover of recursive
//   doubling and ring algorithms (pretend nodes cannot measure a network).
// - From 64 KiB it is bandwidth-bound: "hierarchical" puts 1/local_size of the
//   bucket on each rank's inter-node ring; then the flat ring (2(n-1)/n of the
//   bucket per rank), then the native path.
// - The other collectives across nodes go hierarchical from the sizes where it
//   beat MPI's own on the pretend cluster (allgather and reducescatter from 64
//   KiB, alltoall from 256 KiB sent per rank, broadcast from 1 MiB), and only
//   with several ranks on each node: with one, the node step is empty and only
//   hierarchical's agreement round is added to MPI's collective.
// - Anything unlisted falls back to the world's order, so a new transport is
//   usable before a rule ranks it.
//
// Note [Adasum has an engine of its own]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// ADASUM is not element-wise: it combines whole tensors by recursive vector
// halving with per-tensor dot products (src/algorithms/adasum.h), which no
// element-wise engine computes. So adasum buckets go only to a transport whose
// capabilities say `adasum`, whatever the other rules or KOLO_TRANSPORT say, and
// such a transport is never a candidate for anything else.
constexpr const char* kDefaultRules = R"(
adasum                   *      *      *      : adasum only
allreduce                device *      *      : nccl
allreduce                host   0-64K  node   : shm, mpi, hierarchical
allreduce                host   64K-   node   : shm, hierarchical, ring, mpi
allreduce                host   0-64K  nodes  : mpi, hierarchical
allreduce                host   64K-   nodes  : hierarchical, ring, mpi
allgather|reducescatter  host   64K-   nodes+ : hierarchical
broadcast                host   1M-    nodes+ : hierarchical
alltoall                 host   256K-  nodes+ : hierarchical
*                        host   *      node   : shm
)";

}  // namespace

bool Placement::within(Span span) const {
  switch (span) {
    case Span::kAny: return true;
    case Span::kOneNode: return one_node;
    case Span::kNodes: return !one_node;
    case Span::kNodesShared: return !one_node && shared_nodes;
  }
  return false;
}

bool Rule::matches(Kind kind, DeviceKind where, size_t bytes, const Placement& placement) const {
  if (!placement.within(span)) return false;
  if (((kinds >> static_cast<int>(kind)) & 1u) == 0) return false;
  if (memory == Memory::kHost && where != DeviceKind::kCpu) return false;
  if (memory == Memory::kDevice && where == DeviceKind::kCpu) return false;
  return bytes >= min_bytes && bytes < max_bytes;
}

std::string Rule::to_string() const {
  std::string k;
  if (kinds == kStarKinds) {
    k = "*";
  } else {
    for (int i = 0; i < kNumKinds; ++i)
      if ((kinds >> i) & 1u) k += (k.empty() ? "" : "|") + std::string(kKindNames[i]);
  }
  const char* mem = memory == Memory::kHost ? "host" : memory == Memory::kDevice ? "device" : "*";
  std::string sizes = "*";
  if (min_bytes != 0 || max_bytes != kNoLimit)
    sizes = bytes_text(min_bytes) + "-" + (max_bytes == kNoLimit ? "" : bytes_text(max_bytes));
  const char* where = span == Span::kOneNode ? "node"
                      : span == Span::kNodes ? "nodes"
                      : span == Span::kNodesShared ? "nodes+" : "*";
  std::string names;
  for (const std::string& t : transports) names += (names.empty() ? "" : ", ") + t;
  auto pad = [](std::string s, size_t w) { return s.size() < w ? s + std::string(w - s.size(), ' ') : s + " "; };
  return pad(k, 24) + pad(mem, 7) + pad(sizes, 7) + pad(where, 7) + ": " + names +
         (only ? " only" : "");
}

Status SelectionTable::parse(const std::string& text, const std::vector<std::string>& known,
                             SelectionTable* out) {
  out->rules_.clear();
  std::string flat = text;
  std::replace(flat.begin(), flat.end(), '\n', ';');
  for (std::string line : split(flat, ';')) {
    line = trim(line.substr(0, line.find('#')));
    if (line.empty()) continue;
    Rule rule;
    Status s = parse_rule(line, known, &rule);
    if (!s.ok()) return invalid_argument("selection rule \"" + line + "\": " + s.message());
    out->rules_.push_back(std::move(rule));
  }
  return Status::OK();
}

const SelectionTable& SelectionTable::defaults() {
  static const SelectionTable table = [] {
    SelectionTable t;
    Status s = parse(kDefaultRules, {}, &t);
    (void)s;  // kolo's own text; selection_test parses it
    return t;
  }();
  return table;
}

const Rule* SelectionTable::match(Kind kind, DeviceKind memory, size_t bytes,
                                  const Placement& where) const {
  for (const Rule& r : rules_)
    if (r.matches(kind, memory, bytes, where)) return &r;
  return nullptr;
}

std::string SelectionTable::to_string() const {
  std::string out;
  for (const Rule& r : rules_) out += r.to_string() + "\n";
  return out;
}

void SelectionTable::prepend(const std::vector<Rule>& rules) {
  rules_.insert(rules_.begin(), rules.begin(), rules.end());
}

void SelectionTable::promote(const std::string& name, size_t min_bytes, size_t max_bytes) {
  for (Rule& r : rules_) {
    if (!is_host_allreduce(r) || r.only || r.min_bytes < min_bytes || r.max_bytes > max_bytes) continue;
    r.transports.erase(std::remove(r.transports.begin(), r.transports.end(), name),
                       r.transports.end());
    r.transports.insert(r.transports.begin(), name);
  }
}

void SelectionTable::insert_after(const std::string& name, const std::string& after) {
  for (Rule& r : rules_) {
    if (!is_host_allreduce(r) || r.only) continue;
    r.transports.erase(std::remove(r.transports.begin(), r.transports.end(), name),
                       r.transports.end());
    auto at = std::find(r.transports.begin(), r.transports.end(), after);
    r.transports.insert(at == r.transports.end() ? r.transports.begin() : at + 1, name);
  }
}

}  // namespace kolo::transport
