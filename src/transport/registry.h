// The transport registry: which transports kolo knows, which this build has, and
// how a world's engines are composed into the transports it offers. Which one
// serves a call is the selector's (selector.h), read from the selection table
// (selection.h).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "transport/control_plane.h"
#include "transport/device.h"
#include "transport/factory.h"
#include "transport/selector.h"
#include "transport/transport.h"
#include "transport/world.h"

namespace kolo::transport {

struct TransportInfo {
  std::string name;
  bool built = false;
  std::string reason;  // why not built, or what it is when built
};

// Every transport name kolo knows, with this build's verdict.
const std::vector<TransportInfo>& known_transports();

// "auto" or a name from known_transports(); anything else is an error naming the
// accepted values.
Status validate_preference(const std::string& preference);

// Whether the known transport `name` takes device memory (the selection table's
// KOLO_TRANSPORT rules before a world exists: kolo-info).
bool is_device_transport(const std::string& name);

// What a call on device memory lacks in a world that offers no device transport:
// this build's device transport, and why it is not there (an error message's end).
std::string device_transport_missing();

// KOLO_SELECT: rules in the selection table's syntax that name only transports
// kolo knows (or "adasum"); an error names the rule and the problem.
Status validate_rules(const std::string& rules);

// The knobs that shape which transports a world offers and how they are built.
struct BuildOptions {
  size_t fusion_bytes = 0;              // KOLO_FUSION_THRESHOLD: the device fusion buffer
  bool hierarchical_allreduce = false;  // KOLO_HIERARCHICAL_ALLREDUCE: device buckets too
  size_t shm_slot_bytes = 512 << 10;    // the shm window's slot: the largest slice it can take
};

// Makes the device transport with a device fusion buffer of `fusion_bytes`,
// hierarchical when `cross` is set; *support is its DeviceSupport face (owned by
// *out). Unsupported, with the reason, where there is none.
using DeviceMaker = std::function<Status(size_t fusion_bytes, std::shared_ptr<CrossEngine> cross,
                                         std::unique_ptr<Transport>* out, DeviceSupport** support)>;

// Composes "hierarchical" from the node layer's engines and a cross-node engine
// over the world's control plane (tests give a fake; empty: transports/hierarchical's).
using HierarchicalMaker =
    std::function<Status(ControlPlane* control, std::unique_ptr<shm::ShmTransport> node,
                         std::shared_ptr<CrossEngine> cross, std::unique_ptr<Transport>* out)>;

// The node layer's allreduce slots a world makes where it has several nodes: the
// hierarchical transport's intra-node stage (transports/hierarchical).
size_t hierarchical_slot_bytes();

// Builds the transports `topology`'s world offers, appends them to
// world->transports in the world's order (the factory's native one, then the
// ring and Adasum over world->p2p where it is set, then shm on one node or
// hierarchical on several nodes of equal size, then the device transport) and
// sets world->device_support. The device transport is `device`'s, or, when that
// is empty, the nccl library's over world->control (which must then be set);
// hierarchical is `hierarchical`'s, or transports/hierarchical's. A cross-node
// engine the world's factory does not give is made over world->p2p and
// world->control. See Note [Which transports a world offers]. Collective over
// the world.
Status build_transports(TransportFactory& factory, const Topology& topology,
                        const BuildOptions& options, World* world,
                        const DeviceMaker& device = nullptr,
                        const HierarchicalMaker& hierarchical = nullptr);

}  // namespace kolo::transport
