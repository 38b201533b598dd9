#include "transport/selector.h"

#include <algorithm>
#include <functional>
#include <utility>

#include "common/check.h"
#include "common/logging.h"

namespace kolo::transport {
namespace {

constexpr size_t kNoLimit = std::numeric_limits<size_t>::max();

std::string offered_names(const std::vector<Transport*>& offered) {
  std::string names;
  for (const Transport* t : offered) names += (names.empty() ? "" : ", ") + std::string(t->name());
  return names.empty() ? "none" : names;
}

std::string describe(const Bucket& b) {
  return "bucket " + std::to_string(b.sequence) + " (" + std::to_string(b.bytes()) + " bytes " +
         dtype_name(b.dtype) + " " + op_name(b.reduction.op) + " on " + device_name(b.device) + ")";
}

Kind kind_of(Collective op) {
  switch (op) {
    case Collective::kAllgather: return Kind::kAllgather;
    case Collective::kBroadcast: return Kind::kBroadcast;
    case Collective::kAlltoall: return Kind::kAlltoall;
    case Collective::kReducescatter: return Kind::kReducescatter;
    default: return Kind::kAllreduce;
  }
}

Collective collective_of(Kind kind) {
  switch (kind) {
    case Kind::kAllgather: return Collective::kAllgather;
    case Kind::kBroadcast: return Collective::kBroadcast;
    case Kind::kAlltoall: return Collective::kAlltoall;
    case Kind::kReducescatter: return Collective::kReducescatter;
    default: return Collective::kAllreduce;
  }
}

constexpr uint32_t kind_bit(Kind k) { return 1u << static_cast<int>(k); }

// The rules KOLO_TRANSPORT=`name` stands for: that transport alone for its own
// memory's allreduce buckets (an error where it cannot serve one), and first
// for the other collectives of that memory.
std::vector<Rule> preference_rules(const std::string& name, bool device) {
  Rule allreduce;
  allreduce.kinds = kind_bit(Kind::kAllreduce);
  allreduce.memory = device ? Memory::kDevice : Memory::kHost;
  allreduce.transports = {name};
  allreduce.only = true;
  Rule others = allreduce;
  others.kinds = kind_bit(Kind::kAllgather) | kind_bit(Kind::kBroadcast) |
                 kind_bit(Kind::kAlltoall) | kind_bit(Kind::kReducescatter);
  others.only = false;
  return {allreduce, others};
}

}  // namespace

Selector::Selector(std::vector<Transport*> offered, SelectorOptions options, Topology topology)
    : offered_(std::move(offered)), options_(std::move(options)), topology_(topology) {
  for (const Transport* t : offered_) caps_.push_back(t->capabilities());
  placement_.one_node = topology_.local_size == topology_.size;
  placement_.shared_nodes = topology_.local_size >= 2;
  refresh();
}

Selector::Selector(std::vector<Transport*> offered, std::string preference, Topology topology,
                   bool prefer_hierarchical)
    : Selector(std::move(offered),
               SelectorOptions{std::move(preference), "", prefer_hierarchical, "auto", "auto"},
               topology) {}

Transport* Selector::find(const std::string& name) const {
  for (Transport* t : offered_)
    if (name == t->name()) return t;
  return nullptr;
}

const Carrier* Selector::carrier() const {
  for (size_t i = 0; i < offered_.size(); ++i)
    if (caps_[i].carries && offered_[i]->carrier() != nullptr) return offered_[i]->carrier();
  return nullptr;
}

const Capabilities& Selector::caps(const Transport* t) const {
  for (size_t i = 0; i < offered_.size(); ++i)
    if (offered_[i] == t) return caps_[i];
  static const Capabilities kNone;
  return kNone;
}

bool Selector::serves(const Transport* t, Kind kind) const {
  const Capabilities& c = caps(t);
  if (kind == Kind::kAdasum) return c.adasum;
  return !c.adasum && c.moves(collective_of(kind));
}

Status Selector::table_for(const SelectorOptions& options, bool device, SelectionTable* out) {
  *out = SelectionTable::defaults();
  SelectionTable extra;
  Status parsed = SelectionTable::parse(options.rules, {}, &extra);
  if (parsed.ok()) out->prepend(extra.rules());
  if (options.preference != "auto") out->prepend(preference_rules(options.preference, device));
  if (options.prefer_hierarchical) out->insert_after("hierarchical", "shm");
  if (options.first_small != "auto") out->promote(options.first_small, 0, kSmallBucketBytes);
  if (options.first_large != "auto") out->promote(options.first_large, kSmallBucketBytes, kNoLimit);
  return parsed;
}

void Selector::refresh() {
  const Transport* preferred = find(options_.preference);
  const bool device = preferred != nullptr && caps(preferred).device && !caps(preferred).host;
  rules_status_ = table_for(options_, device, &table_);

  compiled_.clear();
  for (const Rule& rule : table_.rules()) {
    if (!placement_.within(rule.span)) continue;
    Compiled c{&rule, {}};
    for (int k = 0; k < kNumKinds; ++k)
      if ((rule.kinds >> k) & 1u) c.order[k] = candidates(&rule, static_cast<Kind>(k));
    compiled_.push_back(std::move(c));
  }
  for (int k = 0; k < kNumKinds; ++k) fallback_[k] = candidates(nullptr, static_cast<Kind>(k));
  valid_ = check_options();
  last_ = {};  // Note [The last choice is kept]
}

std::vector<Transport*> Selector::candidates(const Rule* rule, Kind kind) const {
  std::vector<Transport*> order;
  auto add = [&](Transport* t) {
    if (t != nullptr && serves(t, kind) && std::find(order.begin(), order.end(), t) == order.end())
      order.push_back(t);
  };
  if (rule != nullptr)
    for (const std::string& name : rule->transports) add(find(name));
  if (rule == nullptr || !rule->only)
    for (Transport* t : offered_) add(t);
  return order;
}

const std::vector<Transport*>& Selector::order_for(Kind kind, DeviceKind memory,
                                                   size_t bytes) const {
  for (const Compiled& c : compiled_)
    if (c.rule->matches(kind, memory, bytes, placement_)) return c.order[static_cast<int>(kind)];
  return fallback_[static_cast<int>(kind)];
}

Status Selector::check_options() const {
  if (!rules_status_.ok()) return rules_status_.with_context("KOLO_SELECT");
  if (offered_.empty()) return unsupported("this world offers no transport");
  if (options_.preference != "auto" && find(options_.preference) == nullptr)
    return unsupported("KOLO_TRANSPORT=" + options_.preference +
                       " is not offered by this world; it offers: " + offered_names(offered_));
  return Status::OK();
}

Status Selector::pick(const std::vector<Transport*>& order, Kind kind, DeviceKind memory,
                      DataType dtype, size_t bytes, bool deterministic,
                      const std::function<std::string()>& what,
                      const std::function<Status(Transport*)>& supports,
                      Transport** chosen) const {
  *chosen = nullptr;
  std::string skipped;
  for (Transport* t : order) {
    const Capabilities& c = caps(t);
    Status s;
    if (!c.takes_memory(memory)) s = unsupported(std::string("no ") + (memory == DeviceKind::kCpu ? "host" : "device") + " memory");
    else if (!c.takes(dtype)) s = unsupported("no " + dtype_name(dtype));
    else if (bytes > c.max_bytes) s = unsupported("at most " + std::to_string(c.max_bytes) + " bytes");
    else if (deterministic && !c.deterministic) s = unsupported("does not reduce in rank order");
    else s = supports(t);
    if (s.ok()) {
      KOLO_LOG(kDebug) << what() << ": transport " << t->name()
                       << (skipped.empty() ? "" : "; skipped ") << skipped;
      *chosen = t;
      return Status::OK();
    }
    KOLO_LOG(kDebug) << what() << ": skipping " << t->name() << ": " << s.message();
    skipped += std::string(skipped.empty() ? "" : "; ") + t->name() + ": " + s.message();
  }
  (void)kind;
  // Note [Deterministic reductions] (transport.h): say which knob asked.
  const std::string why =
      deterministic ? " deterministically (KOLO_DETERMINISTIC=1 or the call's deterministic "
                      "flag asks for rank order; NCCL and Adasum do not offer it)"
                    : "";
  return unsupported("no transport serves " + what() + why + " (offered: " +
                     offered_names(offered_) + (skipped.empty() ? "" : "; " + skipped) + ")");
}

// Note [The last choice is kept] (selector.h). The kind follows from the op.
Status Selector::select(const Bucket& bucket, Transport** chosen) const {
  if (!valid_.ok()) return valid_;
  const Reduction& r = bucket.reduction;
  if (last_.chosen != nullptr && last_.op == r.op && last_.memory == bucket.device.kind &&
      last_.dtype == bucket.dtype && last_.count == bucket.count &&
      last_.deterministic == r.deterministic) {
    KOLO_LOG(kDebug) << describe(bucket) << ": transport " << last_.chosen->name()
                     << " (as the last bucket of this shape)";
    *chosen = last_.chosen;
    return Status::OK();
  }
  const Kind kind = r.op == ReduceOp::kAdasum ? Kind::kAdasum : Kind::kAllreduce;
  Status picked = pick(order_for(kind, bucket.device.kind, bucket.bytes()), kind,
                       bucket.device.kind, bucket.dtype, bucket.bytes(), r.deterministic,
                       [&] { return describe(bucket); },
                       [&](Transport* t) { return t->supports(bucket); }, chosen);
  if (picked.ok())
    last_ = {*chosen, r.op, bucket.device.kind, bucket.dtype, bucket.count, r.deterministic};
  return picked;
}

size_t Selector::call_bytes(Collective op, const CollectiveView& view, int world_size) {
  if (!is_valid(view.dtype)) return 0;
  int64_t count = 0;
  switch (op) {
    case Collective::kBroadcast: count = view.count; break;
    case Collective::kAlltoall:
      count = view.alltoall_total < 0 ? 0 : view.alltoall_total / std::max(world_size, 1);
      break;
    case Collective::kAllgather:
    case Collective::kReducescatter:
      for (int64_t c : view.recv_counts) count += c;
      break;
    default: break;
  }
  return count > 0 ? static_cast<size_t>(count) * dtype_size(view.dtype) : 0;
}

Status Selector::select_collective(Collective op, const CollectiveView& view,
                                   Transport** chosen) const {
  const size_t bytes = call_bytes(op, view, topology_.size);
  auto what = [&] { return std::string(collective_name(op)) + " " + std::to_string(view.sequence); };
  return pick(order_for(kind_of(op), view.device.kind, bytes), kind_of(op), view.device.kind,
              view.dtype, bytes, false, what,
              [&](Transport* t) { return t->supports_collective(op, view); }, chosen);
}

std::vector<std::string> Selector::auto_order(const Bucket& bucket) const {
  const Kind kind = bucket.reduction.op == ReduceOp::kAdasum ? Kind::kAdasum : Kind::kAllreduce;
  std::vector<std::string> names;
  for (const Transport* t : order_for(kind, bucket.device.kind, bucket.bytes()))
    if (caps(t).takes_memory(bucket.device.kind)) names.push_back(t->name());
  return names;
}

std::vector<Transport*> Selector::collective_order(Collective op, const CollectiveView& view) const {
  std::vector<Transport*> order;
  for (Transport* t : order_for(kind_of(op), view.device.kind, call_bytes(op, view, topology_.size)))
    if (caps(t).takes_memory(view.device.kind)) order.push_back(t);
  return order;
}

void Selector::set_first_choices(std::string small, std::string large) {
  options_.first_small = std::move(small);
  options_.first_large = std::move(large);
  refresh();
}

void Selector::set_prefer_hierarchical(bool prefer) {
  options_.prefer_hierarchical = prefer;
  refresh();
}

std::vector<std::string> Selector::host_transports() const {
  std::vector<std::string> names;
  for (const Transport* t : offered_)
    if (caps(t).host && serves(t, Kind::kAllreduce)) names.push_back(t->name());
  return names;
}

Status Selector::validate_first_choice(const char* knob, const std::string& choice) const {
  if (choice == "auto") return Status::OK();
  std::string accepted = "auto";
  for (const std::string& name : host_transports()) {
    if (name == choice) return Status::OK();
    accepted += ", " + name;
  }
  return invalid_argument(std::string(knob) + "=\"" + choice +
                          "\" is not a host transport this world offers; accepted: " + accepted);
}

}  // namespace kolo::transport
