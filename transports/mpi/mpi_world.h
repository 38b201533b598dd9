// The MPI world: kolo's control plane, point-to-point verbs and collective
// transports over MPI, for one process.
#pragma once

#include <cstddef>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>

#include "common/status.h"
#include "transport/registry.h"
#include "transport/world.h"

namespace kolo::mpi {

struct WorldOptions {
  // Fortran handle of a communicator the caller owns (MPI_Comm_c2f); nullopt:
  // MPI_COMM_WORLD. kolo always works on its own duplicate.
  std::optional<int64_t> comm_fortran_handle;
  // Test-only (KOLO_TEST_NODE_SIZE): split the ranks of one machine into pretend
  // nodes of this many ranks. 0: real nodes (MPI_COMM_TYPE_SHARED).
  int test_node_size = 0;
  // What the registry is told when it builds the transports (the MPI world passes
  // it on without reading it).
  transport::BuildOptions build{size_t{64} << 20, false};
  // KOLO_PEER_TIMEOUT_SECONDS: how long a silent peer is waited for
  // (peer_monitor.h); also bounds each step of create_world after the first.
  std::chrono::milliseconds peer_timeout{10000};
  // Runs on every rank once the control plane exists and before any transport is
  // built: kolo_init's agreement (core/init_agreement.h). Collective over the
  // communicator; an error stops create_world there, on every rank alike.
  std::function<Status(transport::ControlPlane&)> agree;
};

// Initialises MPI if nobody has (asking for MPI_THREAD_MULTIPLE; the world's
// finalize then calls MPI_Finalize), or checks that the caller's MPI provides at
// least MPI_THREAD_SERIALIZED. Builds the topology (node = shared-memory
// communicator), the control plane and point-to-point verbs, and has the registry
// build the transports (transport::build_transports over MpiFactory). Collective
// over the communicator.
Status create_world(const WorldOptions& options, transport::World* world);

}  // namespace kolo::mpi
