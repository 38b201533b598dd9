// The node layer for the benchmarks that run under mpiexec on one node: made
// through an MPI control plane over a duplicate of MPI_COMM_WORLD, as a world
// would make it (transports/shm/node.h). The plane is dropped once the node
// exists; the node needs nothing from it after create().
#pragma once

#include <mpi.h>

#include <memory>

#include "common/check.h"
#include "common/status.h"
#include "transports/mpi/mpi_control_plane.h"
#include "transports/shm/node.h"

namespace kolo::bench {

// Every rank of MPI_COMM_WORLD is taken to be on this node (the caller checks).
inline Status node_over_world(const shm::NodeOptions& options, std::shared_ptr<shm::Node>* out) {
  auto comms = std::make_shared<mpi::Comms>();
  MPI_Comm_dup(MPI_COMM_WORLD, &comms->control);
  transport::Topology topology;
  MPI_Comm_rank(MPI_COMM_WORLD, &topology.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &topology.size);
  topology.local_rank = topology.rank;
  topology.local_size = topology.size;
  std::unique_ptr<mpi::MpiControlPlane> plane;
  KOLO_RETURN_IF_ERROR(mpi::MpiControlPlane::create(comms, topology, &plane));
  return shm::Node::create(*plane, options, out);
}

}  // namespace kolo::bench
