// MpiFactory: the engines the MPI world can build, for the registry to compose
// (transport/factory.h). It answers what MPI can do here, and hands out the node
// layer's engines (transports/shm) for "shm" and "hierarchical"; which
// transports a world offers is the registry's decision (build_transports).
#pragma once

#include <memory>

#include "transport/control_plane.h"
#include "transport/factory.h"
#include "transport/point_to_point.h"
#include "transports/mpi/mpi_comm.h"
#include "transports/shm/node.h"

namespace kolo::mpi {

class MpiFactory : public transport::TransportFactory {
 public:
  // `control` and `p2p` are the world's and outlive what this builds; `node` is
  // the world's node layer (its engines' regions).
  MpiFactory(SharedComms comms, std::shared_ptr<shm::Node> node, transport::ControlPlane& control,
             transport::PointToPoint& p2p)
      : comms_(std::move(comms)), node_(std::move(node)), control_(control), p2p_(p2p) {}

  Status native(std::unique_ptr<transport::Transport>* out) override;
  Status ring(std::unique_ptr<transport::Transport>* out) override;
  Status adasum(std::unique_ptr<transport::Transport>* out) override;
  Status shared_memory(size_t slot_bytes, std::unique_ptr<transport::Transport>* out) override;
  Status equal_nodes(bool* out) override;
  Status cross(std::shared_ptr<transport::CrossEngine>* out) override;
  Status hierarchical(std::shared_ptr<transport::CrossEngine> cross,
                      std::unique_ptr<transport::Transport>* out) override;
  Status device(size_t fusion_bytes, std::shared_ptr<transport::CrossEngine> cross,
                std::unique_ptr<transport::Transport>* out,
                transport::DeviceSupport** support) override;

 private:
  SharedComms comms_;
  std::shared_ptr<shm::Node> node_;
  transport::ControlPlane& control_;
  transport::PointToPoint& p2p_;
};

}  // namespace kolo::mpi
