// Capabilities: what a transport declares it can do. The registry's selection
// table (selection.h) names transports in order of preference; a transport is
// tried for a call only if its capabilities cover the call, and then its
// supports() has the last word (the checks that need the call's details, such
// as MPI's int counts). Nothing outside the registry compares transport names:
// whatever else needs to know what a transport is asks its capabilities.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>

#include "common/collective.h"
#include "common/dtype.h"

namespace kolo::transport {

// Where a transport can run, given the world's topology.
enum class Reach : uint8_t {
  kAnyWorld,     // every world that built it
  kOneNode,      // only when every rank of the world is on one node
  kEqualNodes,   // several nodes, each with the same number of ranks
};

// The sizes a transport is cut in, which the autotuner may change (Tuning).
enum class Chunk : uint8_t {
  kNone,
  kNodeSlice,        // a slice through the node layer's slots (KOLO_SHM_SLICE_BYTES)
  kMessageSegment,   // a pipelined message of the point-to-point verbs (KOLO_RING_SEGMENT_BYTES)
};

struct Capabilities {
  // The collectives it moves data for: bit c for Collective c (only the five
  // data-moving ones mean anything). Allreduce here means an element-wise op.
  uint32_t collectives = 0;
  // Reduces op=ADASUM buckets, which no element-wise engine can (Note [Adasum
  // has an engine of its own] in registry.cc). Such a transport is never a
  // candidate for anything else.
  bool adasum = false;
  bool host = false;    // CPU memory
  bool device = false;  // CUDA memory
  // The dtypes it takes: bit t for DataType t.
  uint32_t dtypes = (1u << kNumDataTypes) - 1;
  // The largest call in bytes it takes (the checks per count stay in supports()).
  size_t max_bytes = std::numeric_limits<size_t>::max();
  Reach reach = Reach::kAnyWorld;
  // Built over the world's point-to-point verbs (a world without them has none).
  bool needs_p2p = false;
  // Completes a call from bytes that rode with the negotiation's AND (Note
  // [Data rides with the AND] in core/negotiator.h); such a transport also
  // implements the Carrier face (carrier.h).
  bool carries = false;
  Chunk chunk = Chunk::kNone;
  // Reduces a Reduction marked deterministic (Note [Deterministic reductions] in
  // transport.h) in rank order; a bucket so marked goes to no other transport.
  bool deterministic = false;

  bool moves(Collective c) const { return (collectives >> static_cast<int>(c)) & 1u; }
  bool takes(DataType t) const { return (dtypes >> static_cast<int>(t)) & 1u; }
  bool takes_memory(DeviceKind kind) const { return kind == DeviceKind::kCuda ? device : host; }
};

constexpr uint32_t collective_bit(Collective c) { return 1u << static_cast<int>(c); }

// Every data-moving collective.
constexpr uint32_t kAllCollectives =
    collective_bit(Collective::kAllreduce) | collective_bit(Collective::kAllgather) |
    collective_bit(Collective::kBroadcast) | collective_bit(Collective::kAlltoall) |
    collective_bit(Collective::kReducescatter);

}  // namespace kolo::transport
