// Turning a caller's collective arguments into a TensorEntry, with every check a
// caller can fail on its own rank (before anything is enqueued). The messages
// name the tensor and the argument. Whether this world takes CUDA memory at all is
// the runtime's check (it owns the device transport), made before this one.
#pragma once

#include "common/status.h"
#include "core/runtime.h"
#include "transport/control_plane.h"

namespace kolo::core {

// On success the entry has taken the args' name (moved, not copied).
Status make_entry(CollectiveArgs&& args, const transport::Topology& topology, TensorEntry* entry);

// Horovod's reducescatter shards: with q = rows / size and m = rows % size, ranks
// below m get q + 1 rows, the others q.
int64_t shard_rows(int64_t rows, int rank, int size);

}  // namespace kolo::core
