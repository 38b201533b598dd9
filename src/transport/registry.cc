#include "transport/registry.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "common/check.h"
#include "common/logging.h"
#include "kolo_build_config.h"

namespace kolo::transport {
namespace {

constexpr bool kHaveNccl = KOLO_HAVE_NCCL != 0;

// Note [Auto order]
// ~~~~~~~~~~~~~~~~~
// With KOLO_TRANSPORT=auto the selector tries transports in an order that depends
// only on the bucket (its device and size in bytes) and on whether the world is
// one node (local_size == size: the same answer on every rank), and takes the
// first that the world offers and whose supports() is OK. Since all of these are
// the same on every rank, every rank picks the same transport for the same bucket.
//
// - CUDA buckets: "nccl" first; it is the only transport that reduces device
//   memory without staging it through the host.
// - CPU, one node: "shm" first at every size. It moves ~4.5 bytes of memory
//   traffic per byte of bucket (2 ranks) with no MPI call and no message, so it
//   beats both MPI paths from a few KiB up, and at 8 B to 2 KiB it costs the
//   same as the native path (both are dominated by the coordinator's own work
//   and the waits). Then by size as for several nodes.
// - CPU, several nodes, under kSmallBucketBytes: latency-bound. The ring pays
//   2(n-1) message latencies whatever the size, while the native MPI_Allreduce
//   uses log2(n)-step algorithms (recursive doubling) and, on one node, MPICH's
//   shared-memory path. So: "mpi", "hierarchical", "loopback" (the test world's
//   reference, one rendezvous), "ring".
// - CPU, several nodes, larger: bandwidth-bound. "hierarchical" moves a bucket
//   through shared memory inside the node and puts only 1/local_size of it on
//   each rank's inter-node ring; then the flat "ring" (2(n-1)/n of the bucket per
//   rank, the optimum for one level); then "mpi", "loopback".
// - Transports a world offers that the order does not name go last, in the
//   world's own order, so that a new transport is usable before it is ranked.
//
// The measurements behind this order: docs/perf, "Design measurements".
//
// kSmallBucketBytes = 64 KiB: the crossover of recursive doubling and ring
// algorithms; pretend nodes (KOLO_TEST_NODE_SIZE) cannot measure a network, so
// the multi-node crossover is the textbook one until a cluster measures it.
constexpr size_t kSmallBucketBytes = Selector::kSmallBucketBytes;

std::string offered_names(const std::vector<Transport*>& offered) {
  std::string names;
  for (const Transport* t : offered) names += (names.empty() ? "" : ", ") + std::string(t->name());
  return names.empty() ? "none" : names;
}

std::string describe(const Bucket& b) {
  return "bucket " + std::to_string(b.sequence) + " (" + std::to_string(b.bytes()) + " bytes " +
         dtype_name(b.dtype) + " " + op_name(b.reduction.op) + " on " + device_name(b.device) + ")";
}

}  // namespace

const std::vector<TransportInfo>& known_transports() {
  static const std::vector<TransportInfo> kKnown = {
      {"mpi", true, "MPI_Allreduce, the native collective"},
      {"ring", true, "kolo's ring allreduce over point-to-point (MPI or loopback)"},
      {"loopback", true, "ranks as threads, tests only"},
      {"shm", true,
       "intra-node shared memory (MPI-3 window): allreduce and the other collectives, one "
       "node only"},
      {"hierarchical", true,
       "shared memory inside nodes, ring across nodes; several nodes of equal size"},
      {"nccl", kHaveNccl, KOLO_NCCL_REASON},
  };
  return kKnown;
}

Status validate_preference(const std::string& preference) {
  if (preference == "auto") return Status::OK();
  std::string accepted = "auto";
  for (const TransportInfo& info : known_transports()) {
    if (info.name == preference) return Status::OK();
    accepted += ", " + info.name;
  }
  return invalid_argument("KOLO_TRANSPORT=\"" + preference +
                          "\" is not a transport; accepted: " + accepted);
}

// Note [Which transports a world offers]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Every world offers its native collectives and the ring, and, where it has
// point-to-point verbs, the Adasum engine (Note [Adasum has an engine of its
// own]). One node: the
// shared-memory engine ("shm"). Several nodes of equal size: "hierarchical", the
// node's shared-memory engine with a cross-node engine after each shard. The
// device transport, where built, is hierarchical — the same cross-node engine
// kind, over pinned host copies — when KOLO_HIERARCHICAL_ALLREDUCE asks and the
// nodes are of equal size (Note [Hierarchical on GPUs] in nccl_transport.h).
// Every condition is the same on every rank (topology, and an allreduced
// equal-nodes answer), so every rank makes the same collective calls.
Status build_transports(TransportFactory& factory, const Topology& topology,
                        const BuildOptions& options, World* world) {
  std::unique_ptr<Transport> t;
  // `built` is what the factory answered for `t`: Unsupported leaves it out.
  auto offer = [&](Status built, const char* name) {
    if (built.code() == Code::kUnsupported) {
      KOLO_LOG(kDebug) << "transport " << name << " not offered: " << built.message();
      return Status::OK();
    }
    KOLO_RETURN_IF_ERROR_AS_IS(built);
    world->transports.push_back(std::move(t));
    return Status::OK();
  };
  KOLO_RETURN_IF_ERROR_AS_IS(offer(factory.native(&t), "mpi"));
  KOLO_RETURN_IF_ERROR_AS_IS(offer(factory.ring(&t), "ring"));
  KOLO_RETURN_IF_ERROR_AS_IS(offer(factory.adasum(&t), "adasum"));
  if (topology.local_size == topology.size)
    KOLO_RETURN_IF_ERROR_AS_IS(offer(factory.shared_memory(options.shm_slot_bytes, &t), "shm"));
  bool equal_nodes = false;
  KOLO_RETURN_IF_ERROR_AS_IS(factory.equal_nodes(&equal_nodes));
  // cross_size is the number of nodes when node sizes are equal, on every rank.
  if (equal_nodes && topology.cross_size > 1) {
    std::shared_ptr<CrossEngine> cross;
    Status made = factory.cross(&cross);
    if (made.ok()) made = factory.hierarchical(cross, &t);
    KOLO_RETURN_IF_ERROR_AS_IS(offer(std::move(made), "hierarchical"));
  }
  std::shared_ptr<CrossEngine> device_cross;
  if (kHaveNccl && options.hierarchical_allreduce && equal_nodes) {
    Status made = factory.cross(&device_cross);
    if (made.code() != Code::kUnsupported) KOLO_RETURN_IF_ERROR_AS_IS(made);
  }
  DeviceSupport* support = nullptr;
  Status device = factory.device(options.fusion_bytes, device_cross, &t, &support);
  if (device.ok()) world->device = support;
  return offer(std::move(device), "nccl");
}

Selector::Selector(std::vector<Transport*> offered, std::string preference, Topology topology,
                   bool prefer_hierarchical)
    : offered_(std::move(offered)),
      preference_(std::move(preference)),
      topology_(topology),
      prefer_hierarchical_(prefer_hierarchical) {
  refresh_orders();
}

Transport* Selector::find(const std::string& name) const {
  for (Transport* t : offered_) {
    if (name == t->name()) return t;
  }
  return nullptr;
}

Status Selector::validate() const {
  KOLO_RETURN_IF_ERROR(validate_preference(preference_));
  if (preference_ == "auto") {
    if (offered_.empty()) return unsupported("KOLO_TRANSPORT=auto: this world offers no transport");
    return Status::OK();
  }
  if (find(preference_)) return Status::OK();
  for (const TransportInfo& info : known_transports()) {
    if (info.name == preference_ && !info.built) {
      return unsupported("KOLO_TRANSPORT=" + preference_ + " is not in this build (" + info.reason +
                         "); this world offers: " + offered_names(offered_));
    }
  }
  return unsupported("KOLO_TRANSPORT=" + preference_ +
                     " is not offered by this world; it offers: " + offered_names(offered_));
}

std::vector<Transport*> Selector::rank_transports(DeviceKind device, bool small) const {
  std::vector<std::string> ranked;
  if (device == DeviceKind::kCuda) ranked.push_back("nccl");
  // See Note [Auto order].
  const bool one_node = topology_.local_size == topology_.size;
  if (one_node) ranked.push_back("shm");
  // KOLO_HIERARCHICAL_ALLREDUCE=1 (Horovod's HOROVOD_HIERARCHICAL_ALLREDUCE): the
  // hierarchical path for every bucket size, where the world offers it.
  if (prefer_hierarchical_) ranked.push_back("hierarchical");
  if (small) {
    ranked.insert(ranked.end(), {"mpi", "hierarchical", "loopback", "ring"});
  } else {
    ranked.insert(ranked.end(), {"hierarchical", "ring", "mpi", "loopback"});
  }
  std::vector<Transport*> order;
  for (const std::string& name : ranked) {
    Transport* t = find(name);
    if (t != nullptr && std::find(order.begin(), order.end(), t) == order.end()) order.push_back(t);
  }
  for (Transport* t : offered_) {  // unranked ones last, in the world's order
    bool listed = std::string(t->name()) == "adasum";  // See Note [Adasum has an engine of its own].
    for (const std::string& name : ranked) listed = listed || name == t->name();
    if (!listed) order.push_back(t);
  }
  // KOLO_TRANSPORT_SMALL / _LARGE (or the autotuner): the class's first choice.
  const std::string& first = small ? first_small_ : first_large_;
  if (device == DeviceKind::kCpu && first != "auto") {
    auto it = std::find(order.begin(), order.end(), find(first));
    if (it != order.end()) std::rotate(order.begin(), it, it + 1);
  }
  return order;
}

void Selector::refresh_orders() {
  for (DeviceKind device : {DeviceKind::kCpu, DeviceKind::kCuda}) {
    for (bool small : {false, true})
      orders_[device == DeviceKind::kCuda][small] = rank_transports(device, small);
  }
  for (bool host : {false, true}) {
    for (bool hierarchical : {false, true})
      collective_orders_[host][hierarchical] = rank_collective_transports(host, hierarchical);
  }
}

const std::vector<Transport*>& Selector::order_for(const Bucket& bucket) const {
  return orders_[bucket.device.kind == DeviceKind::kCuda][bucket.bytes() < kSmallBucketBytes];
}

std::vector<std::string> Selector::auto_order(const Bucket& bucket) const {
  std::vector<std::string> names;
  for (const Transport* t : order_for(bucket)) names.push_back(t->name());
  return names;
}

void Selector::set_first_choices(std::string small, std::string large) {
  first_small_ = std::move(small);
  first_large_ = std::move(large);
  refresh_orders();
}

void Selector::set_prefer_hierarchical(bool prefer) {
  prefer_hierarchical_ = prefer;
  refresh_orders();
}

std::vector<std::string> Selector::host_transports() const {
  std::vector<std::string> names;
  for (const Transport* t : offered_)
    // Not the device transport, nor adasum (an op's engine, never a path choice).
    if (std::string(t->name()) != "nccl" && std::string(t->name()) != "adasum")
      names.push_back(t->name());
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

// Note [Adasum has an engine of its own]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// ADASUM is not element-wise: it combines whole tensors by recursive vector
// halving with per-tensor dot products (src/algorithms/adasum.h), which no
// element-wise engine (MPI_Allreduce, the ring, shm, NCCL) can compute. So an
// op=adasum bucket goes to the "adasum" transport whatever KOLO_TRANSPORT says
// (that knob picks among engines that compute the same thing), and the "adasum"
// transport is never a candidate for other buckets. "adasum" is not a
// KOLO_TRANSPORT value: it is an op's engine, not a choice of path.
Status Selector::select(const Bucket& bucket, Transport** chosen) const {
  *chosen = nullptr;
  if (bucket.reduction.op == ReduceOp::kAdasum) {
    Transport* t = find("adasum");
    if (t == nullptr)
      return unsupported(describe(bucket) + ": this world offers no Adasum engine (offered: " +
                         offered_names(offered_) + ")");
    KOLO_RETURN_IF_ERROR_AS_IS(t->supports(bucket));
    *chosen = t;
    return Status::OK();
  }
  // KOLO_TRANSPORT names a host transport or the device one ("nccl"); it steers
  // the buckets of its own kind, and the others go in auto order.
  const bool device_preference = preference_ == "nccl";
  const bool device_bucket = bucket.device.kind != DeviceKind::kCpu;
  if (preference_ != "auto" && device_preference == device_bucket) {
    KOLO_RETURN_IF_ERROR(validate());
    Transport* t = find(preference_);
    Status s = t->supports(bucket);
    if (!s.ok()) return s.with_context("KOLO_TRANSPORT=" + preference_ + ", " + describe(bucket));
    *chosen = t;
    return Status::OK();
  }
  // See Note [Auto order].
  std::string skipped;
  for (Transport* t : order_for(bucket)) {
    const char* name = t->name();
    Status s = t->supports(bucket);
    if (s.ok()) {
      KOLO_LOG(kDebug) << describe(bucket) << ": transport " << name
                       << (skipped.empty() ? "" : "; skipped ") << skipped;
      *chosen = t;
      return Status::OK();
    }
    KOLO_LOG(kDebug) << describe(bucket) << ": skipping " << name << ": " << s.message();
    skipped += std::string(skipped.empty() ? "" : "; ") + name + ": " + s.message();
  }
  return unsupported("no transport supports " + describe(bucket) + " (offered: " +
                     offered_names(offered_) + (skipped.empty() ? "" : "; " + skipped) + ")");
}

// Note [Which transport runs the other collectives]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Host collectives try, in order: the transport KOLO_TRANSPORT names (so "mpi"
// forces MPI's collectives); with "auto" on one node, "shm" (kolo's shared-memory
// engine, shm_collectives.h: faster than MPI's from a few KiB up, docs/perf);
// with "auto" on several nodes, "hierarchical" (hierarchical_collectives.h) where
// the world offers it (nodes of equal size), the nodes have several ranks (with
// one, its cross step is MPI's own collective, plus its agreement round) and the
// call is at least hierarchical_min_bytes(op); then every offered transport in the world's order
// (mpi first), so a preference that implements none of them ("ring") still gets
// MPI's. The first whose supports_collective() is OK runs it: the same on every
// rank (topology, preference and the sizes compared are).
//
// The sizes, from the pretend cluster at 2 hosts x 2 ranks (10 Gbit/s links,
// kolo-allreduce-perf -t hierarchical -r mpi, 4 KiB to 16 MiB): hierarchical ÷
// MPI time was below 1 under them in every run and above 1 from them up:
// allgather and reducescatter from 64 KiB (of output, of input), alltoall from
// 256 KiB sent per rank on average, broadcast from 1 MiB. Below, the call's extra
// cross-node round (Note [One verdict for every rank]) costs more than the bytes
// saved. Alltoall's size is the world's total (CollectiveView::alltoall_total, the
// same on every rank), not this rank's row; a caller that does not know it (-1)
// keeps MPI's.
size_t Selector::hierarchical_min_bytes(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::kBroadcast: return size_t{1} << 20;
    case CollectiveOp::kAlltoall: return size_t{256} << 10;
    default: return size_t{64} << 10;
  }
}

// Whether "auto" tries "hierarchical" first for this collective, from sizes that
// are the same on every rank (see Note [Which transport runs the other collectives]).
bool Selector::hierarchical_first(CollectiveOp op, const CollectiveView& view) const {
  // One rank per node: no node step, so only the agreement round over MPI's own.
  if (!is_valid(view.dtype) || topology_.local_size == topology_.size || topology_.local_size < 2)
    return false;
  int64_t count = 0;
  if (op == CollectiveOp::kBroadcast) count = view.count;
  if (op == CollectiveOp::kAlltoall) count = view.alltoall_total / std::max(topology_.size, 1);
  if (op == CollectiveOp::kAllgather || op == CollectiveOp::kReducescatter) {
    for (int64_t c : view.recv_counts) count += c;
  }
  return count > 0 && static_cast<size_t>(count) * dtype_size(view.dtype) >= hierarchical_min_bytes(op);
}

std::vector<Transport*> Selector::rank_collective_transports(bool host,
                                                             bool hierarchical) const {
  std::vector<Transport*> order;
  auto add = [&](Transport* t) {
    if (t != nullptr && std::find(order.begin(), order.end(), t) == order.end()) order.push_back(t);
  };
  if (host && preference_ != "auto" && preference_ != "nccl") add(find(preference_));
  if (host && preference_ == "auto" && topology_.local_size == topology_.size) add(find("shm"));
  if (host && preference_ == "auto" && hierarchical) add(find("hierarchical"));
  for (Transport* t : offered_) add(t);
  return order;
}

const std::vector<Transport*>& Selector::collective_order_for(CollectiveOp op,
                                                              const CollectiveView& view) const {
  const bool host = view.device.kind == DeviceKind::kCpu;
  return collective_orders_[host][host && hierarchical_first(op, view)];
}

std::vector<Transport*> Selector::collective_order(CollectiveOp op,
                                                  const CollectiveView& view) const {
  return collective_order_for(op, view);
}

Status Selector::select_collective(CollectiveOp op, const CollectiveView& view,
                                   Transport** chosen) const {
  std::string reasons;
  for (Transport* t : collective_order_for(op, view)) {
    Status s = t->supports_collective(op, view);
    if (s.ok()) {
      KOLO_LOG(kDebug) << collective_op_name(op) << " " << view.sequence << ": " << t->name();
      *chosen = t;
      return Status::OK();
    }
    KOLO_LOG(kDebug) << collective_op_name(op) << ": skipping " << t->name() << ": " << s.message();
    reasons += std::string(reasons.empty() ? "" : "; ") + t->name() + ": " + s.message();
  }
  return unsupported(std::string("no transport implements ") + collective_op_name(op) + " here (" +
                     reasons + ")");
}

}  // namespace kolo::transport
