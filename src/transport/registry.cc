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

}  // namespace

const std::vector<TransportInfo>& known_transports() {
  static const std::vector<TransportInfo> kKnown = {
      {"mpi", true, "MPI_Allreduce, the native collective"},
      {"ring", true, "kolo's ring and collectives over the world's point-to-point verbs"},
      {"shm", true,
       "the node layer's shared memory: allreduce and the other collectives, one node only"},
      {"hierarchical", true,
       "shared memory inside nodes, ring across nodes; several nodes of equal size"},
      {"nccl", kHaveNccl, KOLO_NCCL_REASON},
  };
  return kKnown;
}

bool is_device_transport(const std::string& name) { return name == "nccl"; }

Status validate_rules(const std::string& rules) {
  std::vector<std::string> known = {"adasum"};
  for (const TransportInfo& info : known_transports()) known.push_back(info.name);
  SelectionTable table;
  return SelectionTable::parse(rules, known, &table).with_context("KOLO_SELECT");
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
  if (device.ok()) world->device_support = support;
  return offer(std::move(device), "nccl");
}

}  // namespace kolo::transport
