// TransportFactory: what only a world's backend can build, for the registry to
// choose and compose (registry.h, build_transports). The backend answers what it
// can build; the registry alone decides which transports a world offers and how
// they are composed: it makes the ring and the Adasum engine over the world's
// point-to-point verbs and the device transport over its control plane itself,
// and composes "hierarchical" (transports/hierarchical) from the node layer's
// engines (node()) and a cross-node engine (for host and device buckets alike).
//
// Contract: called once, at init, by the thread that creates the world, in the
// same order on every rank — several methods are collective over the world. Each
// answers Unsupported, with the reason, where this world cannot have the engine;
// any other error fails init. What a method returns is owned by the caller.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "common/dtype.h"
#include "common/status.h"
#include "transport/cross_engine.h"
#include "transport/transport.h"

namespace kolo::shm {
class ShmTransport;  // transports/shm/transport.h: the node layer's engines
}  // namespace kolo::shm

namespace kolo::transport {

class TransportFactory {
 public:
  virtual ~TransportFactory() = default;

  // The backend's native allreduce and collectives ("mpi").
  virtual Status native(std::unique_ptr<Transport>* out) = 0;
  // The node layer's engines over this rank's node ("shm" on one node; the
  // intra-node step of "hierarchical" on several), slices of up to `slot_bytes`.
  // Collective.
  virtual Status node(size_t slot_bytes, std::unique_ptr<shm::ShmTransport>* out) = 0;
  // Whether every node has the same number of ranks. Collective.
  virtual Status equal_nodes(bool* out) = 0;
  // The world's own cross-node engine (see cross_engine.h), where it has one
  // better than kolo's over its verbs; OK with *out null: none of its own, the
  // registry makes kolo's (algorithms/p2p_cross.h) over the world's verbs.
  // Unsupported: no cross-node step in this world. Collective.
  virtual Status cross(std::shared_ptr<CrossEngine>* out) = 0;
};

}  // namespace kolo::transport
