// SocketFactory: what only the socket world can build, for the registry to
// compose (transport/factory.h). The registry makes kolo's ring and Adasum over
// the world's point-to-point verbs and the device transport over its control
// plane itself. There are no native collectives (that is MPI's), and the
// shared-memory and hierarchical engines wait for the node layer
// (transports/shm) to be wired in.
#pragma once

#include <memory>

#include "transport/control_plane.h"
#include "transport/factory.h"

namespace kolo::socket {

class SocketFactory : public transport::TransportFactory {
 public:
  // `control` is the world's and outlives what this builds.
  explicit SocketFactory(transport::ControlPlane& control) : control_(control) {}

  Status native(std::unique_ptr<transport::Transport>* out) override;
  Status shared_memory(size_t slot_bytes, std::unique_ptr<transport::Transport>* out) override;
  Status equal_nodes(bool* out) override;
  Status cross(std::shared_ptr<transport::CrossEngine>* out) override;
  Status hierarchical(std::shared_ptr<transport::CrossEngine> cross,
                      std::unique_ptr<transport::Transport>* out) override;

 private:
  transport::ControlPlane& control_;
};

}  // namespace kolo::socket
