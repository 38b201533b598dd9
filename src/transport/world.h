// World: what one rank's runtime runs on — a control plane, optionally the
// point-to-point verbs, and the collective transports on offer.
//
// A world is made by a transport's factory (transports/mpi: one per process;
// transports/loopback: one per thread-rank) and handed to core::Runtime, which
// owns it from then on and calls `finalize` after its coordinator has stopped.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "transport/control_plane.h"
#include "transport/device.h"
#include "transport/point_to_point.h"
#include "transport/transport.h"

namespace kolo::transport {

struct World {
  std::unique_ptr<ControlPlane> control;
  std::unique_ptr<PointToPoint> p2p;  // null if the world has no point-to-point verbs
  // Collective transports in the world's own order. Ones built over `p2p` (the
  // ring) hold a reference to it, so they are destroyed first (declared after).
  std::vector<std::unique_ptr<Transport>> transports;
  // The device transport's other face (one of `transports`), or null when this
  // world cannot take device tensors.
  DeviceSupport* device = nullptr;
  // Runs once after the coordinator has stopped and the transports are gone
  // (e.g. MPI_Finalize when kolo initialised MPI). May be empty.
  std::function<void()> finalize;

  World() = default;
  World(World&& o) noexcept
      : control(std::move(o.control)),
        p2p(std::move(o.p2p)),
        transports(std::move(o.transports)),
        device(o.device),
        finalize(std::move(o.finalize)) {
    o.device = nullptr;
    o.finalize = nullptr;  // a moved-from std::function need not be empty
  }
  // Releases this world (in order, running its finalize) before taking the other.
  World& operator=(World&& o) noexcept {
    if (this != &o) {
      release();
      control = std::move(o.control);
      p2p = std::move(o.p2p);
      transports = std::move(o.transports);
      device = o.device;
      o.device = nullptr;
      finalize = std::move(o.finalize);
      o.finalize = nullptr;
    }
    return *this;
  }
  ~World() { release(); }

  // The collective part of a world's teardown: destroys the transports, the
  // point-to-point verbs and the control plane, keeping `finalize` for the
  // destructor. core::Runtime calls it on its coordinator thread once every
  // rank has stopped (Note [Shutdown without waiting for the others]).
  void release_transports() {
    device = nullptr;
    transports.clear();
    p2p.reset();
    control.reset();
  }

 private:
  void release() {
    release_transports();
    if (finalize) {
      auto f = std::move(finalize);
      finalize = nullptr;
      f();
    }
  }
};

}  // namespace kolo::transport
