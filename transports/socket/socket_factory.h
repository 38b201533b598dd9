// SocketFactory: the engines the socket world can build, for the registry to
// compose (transport/factory.h). kolo's ring (with the other collectives over the
// same verbs: algorithms/p2p_collectives.h) and Adasum run over the world's
// point-to-point verbs; the device transport bootstraps over its control plane.
// There are no native collectives (that is MPI's), and the shared-memory and
// hierarchical engines wait for the node layer (transports/shm) to be wired in.
#pragma once

#include <memory>

#include "transport/control_plane.h"
#include "transport/factory.h"
#include "transport/point_to_point.h"

namespace kolo::socket {

class SocketFactory : public transport::TransportFactory {
 public:
  // `control` and `p2p` are the world's and outlive what this builds.
  SocketFactory(transport::ControlPlane& control, transport::PointToPoint& p2p)
      : control_(control), p2p_(p2p) {}

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
  transport::ControlPlane& control_;
  transport::PointToPoint& p2p_;
};

}  // namespace kolo::socket
