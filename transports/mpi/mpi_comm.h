// The communicators kolo owns, shared by the MPI control plane, point-to-point
// verbs and transports of one world.
//
// All are duplicates or splits of the caller's communicator, so kolo's traffic
// never matches the caller's. Control (negotiation, doorbell) and data (buckets,
// point-to-point) get separate duplicates, so that a bucket's collective and a
// negotiation's collective never have to be ordered against each other. Every
// communicator has MPI_ERRORS_RETURN. The last owner frees them; that happens
// before MPI_Finalize because World's members die before World::finalize runs.
// `liveness` is the world's PeerMonitor (peer_monitor.h), shared with every piece
// that waits: each wait consults it (Note [Waits consult liveness]).
#pragma once

#include <mpi.h>

#include <memory>

#include "transports/mpi/mpi_wait.h"

namespace kolo::mpi {

struct Comms {
  MPI_Comm control = MPI_COMM_NULL;  // control plane collectives and the doorbell
  MPI_Comm data = MPI_COMM_NULL;     // transports and point-to-point
  MPI_Comm local = MPI_COMM_NULL;    // the ranks of this node
  MPI_Comm cross = MPI_COMM_NULL;    // the ranks with this rank's local_rank
  std::shared_ptr<Liveness> liveness;  // null: waits are not bounded (tests)

  Comms() = default;
  Comms(const Comms&) = delete;
  Comms& operator=(const Comms&) = delete;
  ~Comms() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    liveness.reset();
    if (finalized) return;  // the caller finalised MPI first; nothing left to free
    for (MPI_Comm* comm : {&control, &data, &local, &cross}) {
      if (*comm != MPI_COMM_NULL) MPI_Comm_free(comm);
    }
  }
};

using SharedComms = std::shared_ptr<Comms>;

}  // namespace kolo::mpi
