#include "transport/registry.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "algorithms/adasum.h"
#include "algorithms/p2p_cross.h"
#include "algorithms/ring_allreduce.h"
#include "common/check.h"
#include "common/logging.h"
#include "transports/hierarchical/hierarchical_transport.h"
#include "transports/nccl/nccl_factory.h"
#include "transports/shm/shared_alloc.h"
#include "transports/shm/transport.h"

namespace kolo::transport {
namespace {

// The device transport's entry: the nccl library says whether this build has it.
TransportInfo device_info() {
  TransportInfo info{"nccl", false, ""};
  info.built = nccl::device_transport_built(&info.reason);
  return info;
}

// The tag spaces (Note [Tag spaces] in algorithms/tags.h) of the cross-node
// engines the registry makes over a world's verbs: the host hierarchical's and
// the device transport's, apart from each other and from the ring's (space 0).
constexpr int kHostCrossSpace = 1;
constexpr int kDeviceCrossSpace = 2;

// The cross-node engine: the world's own (factory.cross), else kolo's over the
// world's verbs in `space`. Collective.
Status make_cross(TransportFactory& factory, World* world, int space,
                  std::shared_ptr<CrossEngine>* out) {
  KOLO_RETURN_IF_ERROR_AS_IS(factory.cross(out));
  if (*out != nullptr) return Status::OK();
  if (world->p2p == nullptr || world->control == nullptr)
    return unsupported("no cross-node engine: the world has none of its own and no verbs");
  std::unique_ptr<algorithms::P2PCross> made;
  KOLO_RETURN_IF_ERROR(algorithms::P2PCross::create(*world->control, *world->p2p, space,
                                                    algorithms::RingOptions{}, &made));
  *out = std::move(made);
  return Status::OK();
}

Status make_hierarchical(ControlPlane* control, std::unique_ptr<shm::ShmTransport> node,
                         std::shared_ptr<CrossEngine> cross, std::unique_ptr<Transport>* out) {
  KOLO_CHECK(control != nullptr);
  std::unique_ptr<hierarchical::HierarchicalTransport> t;
  KOLO_RETURN_IF_ERROR_AS_IS(
      hierarchical::HierarchicalTransport::create(*control, std::move(node), std::move(cross), &t));
  *out = std::move(t);
  return Status::OK();
}

}  // namespace

size_t hierarchical_slot_bytes() { return hierarchical::HierarchicalTransport::kSlotBytes; }

const std::vector<TransportInfo>& known_transports() {
  static const std::vector<TransportInfo> kKnown = {
      {"mpi", true, "MPI_Allreduce, the native collective"},
      {"ring", true, "kolo's ring and collectives over the world's point-to-point verbs"},
      {"shm", true,
       "the node layer's shared memory: allreduce and the other collectives, one node only"},
      {"hierarchical", true,
       "shared memory inside nodes, ring across nodes; several nodes of equal size"},
      device_info(),
  };
  return kKnown;
}

bool is_device_transport(const std::string& name) { return name == "nccl"; }

std::string device_transport_missing() {
  const TransportInfo device = device_info();
  if (!device.built)
    return "the NCCL transport, which this kolo does not have (" + device.reason + ")";
  return "the NCCL transport, which this world does not offer";
}

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
// Every world offers its native collectives where it has them, and, where it has
// point-to-point verbs, the ring and the Adasum engine (Note [Adasum has an engine
// of its own]). One node: the shared-memory engine ("shm"). Several nodes of
// equal size: "hierarchical", composed here from the node's shared-memory engines
// (factory.node) and a cross-node engine after each shard — the world's own
// (factory.cross: MPI's cross communicator) or kolo's over the world's verbs
// (algorithms/p2p_cross.h: the socket world's). No transport builds another. The
// device transport, where built, is hierarchical —
// the same cross-node engine kind, over pinned host copies — when
// KOLO_HIERARCHICAL_ALLREDUCE asks and the nodes are of equal size (Note
// [Hierarchical on GPUs] in nccl_transport.h). Every condition is the same on
// every rank (topology, and an allreduced equal-nodes answer), so every rank makes
// the same collective calls.
Status build_transports(TransportFactory& factory, const Topology& topology,
                        const BuildOptions& options, World* world, const DeviceMaker& device,
                        const HierarchicalMaker& hierarchical) {
  std::unique_ptr<Transport> t;
  // `built` is what was answered for `t`: Unsupported leaves it out.
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
  if (world->p2p != nullptr) {
    t = algorithms::make_ring_transport(*world->p2p);
    KOLO_RETURN_IF_ERROR_AS_IS(offer(Status::OK(), "ring"));
    t = algorithms::make_adasum_transport(*world->p2p);
    KOLO_RETURN_IF_ERROR_AS_IS(offer(Status::OK(), "adasum"));
  }
  if (topology.local_size > 1) world->host_outputs = {shm::shared_alloc, shm::shared_free};
  std::unique_ptr<shm::ShmTransport> node;
  if (topology.local_size == topology.size) {
    Status made = factory.node(options.shm_slot_bytes, &node);
    t = std::move(node);
    KOLO_RETURN_IF_ERROR_AS_IS(offer(std::move(made), "shm"));
  }
  bool equal_nodes = false;
  KOLO_RETURN_IF_ERROR_AS_IS(factory.equal_nodes(&equal_nodes));
  // cross_size is the number of nodes when node sizes are equal, on every rank.
  if (equal_nodes && topology.cross_size > 1) {
    std::shared_ptr<CrossEngine> cross;
    Status made = factory.node(hierarchical_slot_bytes(), &node);
    if (made.ok()) made = make_cross(factory, world, kHostCrossSpace, &cross);
    if (made.ok()) {
      made = hierarchical ? hierarchical(world->control.get(), std::move(node), cross, &t)
                          : make_hierarchical(world->control.get(), std::move(node), cross, &t);
    }
    KOLO_RETURN_IF_ERROR_AS_IS(offer(std::move(made), "hierarchical"));
  }
  std::shared_ptr<CrossEngine> device_cross;
  std::string about;
  if (nccl::device_transport_built(&about) && options.hierarchical_allreduce && equal_nodes) {
    Status made = make_cross(factory, world, kDeviceCrossSpace, &device_cross);
    if (made.code() != Code::kUnsupported) KOLO_RETURN_IF_ERROR_AS_IS(made);
  }
  DeviceSupport* support = nullptr;
  Status made;
  if (device) {
    made = device(options.fusion_bytes, device_cross, &t, &support);
  } else {
    KOLO_CHECK(world->control != nullptr);
    made = nccl::make_nccl_transport(*world->control, options.fusion_bytes, device_cross, &t, &support);
  }
  if (made.ok()) world->device_support = support;
  return offer(std::move(made), "nccl");
}

}  // namespace kolo::transport
