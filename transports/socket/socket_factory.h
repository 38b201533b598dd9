// SocketFactory: what only the socket world can build, for the registry to
// compose (transport/factory.h). The registry makes kolo's ring and Adasum over
// the world's point-to-point verbs and the device transport over its control
// plane itself. The node layer (transports/shm, made by socket_node.h) gives the
// engines of "shm" where the whole world is on one host and of "hierarchical"'s
// node step where hosts are several; the registry runs hierarchical's cross-node
// step on kolo's engine over the world's verbs (algorithms/p2p_cross.h), as this
// world has no cross engine of its own. There are no native collectives (that is
// MPI's).
#pragma once

#include <memory>

#include "transport/control_plane.h"
#include "transport/factory.h"
#include "transport/liveness.h"
#include "transports/shm/node.h"

namespace kolo::socket {

class SocketFactory : public transport::TransportFactory {
 public:
  // `control` and `alive` (the plane's Liveness) are the world's and outlive
  // what this builds; `node` is its node layer, null without one.
  SocketFactory(transport::ControlPlane& control, std::shared_ptr<shm::Node> node,
                transport::Liveness* alive)
      : control_(control), node_(std::move(node)), alive_(alive) {}

  Status native(std::unique_ptr<transport::Transport>* out) override;
  Status node(size_t slot_bytes, std::unique_ptr<shm::ShmTransport>* out) override;
  Status equal_nodes(bool* out) override;
  Status cross(std::shared_ptr<transport::CrossEngine>* out) override;

 private:
  transport::ControlPlane& control_;
  std::shared_ptr<shm::Node> node_;
  transport::Liveness* alive_;
};

}  // namespace kolo::socket
