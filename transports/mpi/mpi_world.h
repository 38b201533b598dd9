// The MPI world: kolo's control plane, point-to-point verbs and collective
// transports over MPI, for one process.
#pragma once

#include <cstddef>
#include <chrono>
#include <cstdint>
#include <optional>

#include "common/status.h"
#include "transport/world.h"

namespace kolo::mpi {

struct WorldOptions {
  // Fortran handle of a communicator the caller owns (MPI_Comm_c2f); nullopt:
  // MPI_COMM_WORLD. kolo always works on its own duplicate.
  std::optional<int64_t> comm_fortran_handle;
  // Test-only (KOLO_TEST_NODE_SIZE): split the ranks of one machine into pretend
  // nodes of this many ranks. 0: real nodes (MPI_COMM_TYPE_SHARED).
  int test_node_size = 0;
  // KOLO_FUSION_THRESHOLD: the size of the device transport's fusion buffer.
  size_t fusion_bytes = size_t{64} << 20;
  // KOLO_HIERARCHICAL_ALLREDUCE: the device transport goes hierarchical too.
  bool hierarchical_allreduce = false;
  // KOLO_PEER_TIMEOUT_SECONDS: how long a silent peer is waited for
  // (peer_monitor.h); also bounds each step of create_world after the first.
  std::chrono::milliseconds peer_timeout{10000};
};

// Initialises MPI if nobody has (asking for MPI_THREAD_MULTIPLE; the world's
// finalize then calls MPI_Finalize), or checks that the caller's MPI provides at
// least MPI_THREAD_SERIALIZED. Builds the topology (node = shared-memory
// communicator) and the transports "mpi" (native MPI_Allreduce) and "ring" (kolo's
// ring over MPI point-to-point), the shared-memory ones, and — in a build with
// NCCL — the device transport "nccl" (also the world's DeviceSupport). Collective
// over the communicator.
Status create_world(const WorldOptions& options, transport::World* world);

}  // namespace kolo::mpi
