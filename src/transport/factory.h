// TransportFactory: what only a world's backend can build, for the registry to
// choose and compose (registry.h, build_transports). The backend answers what it
// can build; the registry alone decides which transports a world offers and how
// they are composed: it makes the ring and the Adasum engine over the world's
// point-to-point verbs and the device transport over its control plane itself,
// and composes hierarchical from an intra-node engine and a cross-node engine
// (for host and device buckets alike).
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
#include "transport/transport.h"

namespace kolo::transport {

// An in-place allreduce of host memory among the ranks that share this rank's
// local rank, one per node (the cross-node step of a hierarchical allreduce). Op
// is SUM, MIN, MAX or PRODUCT. Coordinator thread; same order on those ranks.
class CrossEngine {
 public:
  virtual ~CrossEngine() = default;
  virtual Status allreduce(void* data, int64_t count, DataType dtype, ReduceOp op) = 0;
  // As Transport::tune.
  virtual void tune(const Tuning& tuning) {}
};

class TransportFactory {
 public:
  virtual ~TransportFactory() = default;

  // The backend's native allreduce and collectives ("mpi").
  virtual Status native(std::unique_ptr<Transport>* out) = 0;
  // The intra-node shared-memory engine over the whole world ("shm"): only where
  // every rank is on one node; slices of up to `slot_bytes`. Collective.
  virtual Status shared_memory(size_t slot_bytes, std::unique_ptr<Transport>* out) = 0;
  // Whether every node has the same number of ranks. Collective.
  virtual Status equal_nodes(bool* out) = 0;
  // The cross-node engine (see CrossEngine). Collective.
  virtual Status cross(std::shared_ptr<CrossEngine>* out) = 0;
  // The intra-node shared-memory engine with `cross` after each shard's reduction
  // ("hierarchical"). Collective.
  virtual Status hierarchical(std::shared_ptr<CrossEngine> cross, std::unique_ptr<Transport>* out) = 0;
};

}  // namespace kolo::transport
