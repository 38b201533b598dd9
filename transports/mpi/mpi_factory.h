// MpiFactory: what only the MPI world can build, for the registry to compose
// (transport/factory.h): MPI's own collectives, the node layer's engines
// (transports/shm) for "shm" and "hierarchical", and the cross-node engine over
// MPI's cross communicator (mpi_cross.h). Which transports a world offers is the
// registry's decision (build_transports); it makes the ring, Adasum, the device
// transport and "hierarchical" itself.
#pragma once

#include <memory>

#include "transport/control_plane.h"
#include "transport/factory.h"
#include "transports/mpi/mpi_comm.h"
#include "transports/shm/node.h"

namespace kolo::mpi {

class MpiFactory : public transport::TransportFactory {
 public:
  // `control` is the world's and outlives what this builds; `node` is the
  // world's node layer (its engines' regions).
  MpiFactory(SharedComms comms, std::shared_ptr<shm::Node> node, transport::ControlPlane& control)
      : comms_(std::move(comms)), node_(std::move(node)), control_(control) {}

  Status native(std::unique_ptr<transport::Transport>* out) override;
  Status node(size_t slot_bytes, std::unique_ptr<shm::ShmTransport>* out) override;
  Status equal_nodes(bool* out) override;
  Status cross(std::shared_ptr<transport::CrossEngine>* out) override;

 private:
  SharedComms comms_;
  std::shared_ptr<shm::Node> node_;
  transport::ControlPlane& control_;
};

}  // namespace kolo::mpi
