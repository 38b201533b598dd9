// HostMemory: where the outputs kolo allocates on the host (allgather, alltoall)
// come from. A world whose ranks share a node gives kolo_alloc's memory, which
// the node's peers can map (Note [Outputs the peers can map] in
// core/output_pool.h); both null: the heap. Any thread.
#pragma once

#include <cstddef>

#include "common/status.h"

namespace kolo::transport {

struct HostMemory {
  Status (*allocate)(size_t bytes, void** out) = nullptr;
  Status (*release)(void* p) = nullptr;
};

}  // namespace kolo::transport
