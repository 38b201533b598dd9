// World: what one rank's runtime runs on — a control plane, optionally the
// point-to-point verbs, and the collective transports on offer.
//
// A world is made by a transport's factory (transports/mpi: one per process;
// transports/loopback: one per thread-rank) and handed to core::Runtime, which
// owns it from then on and calls `finalize` after its coordinator has stopped.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "transport/control_plane.h"
#include "transport/device.h"
#include "transport/host_memory.h"
#include "transport/point_to_point.h"
#include "transport/transport.h"

namespace kolo::transport {

struct World;

// Builds the world of a process set (Note [A process set is a world]): `ranks` are
// ranks of this world, ascending, without duplicates, this rank among them; `id`
// is the set's id, the same on every member and never reused. Collective over the
// members only; called from a user thread (kolo_process_set_add, serialised per
// process) while this world's coordinator runs, so it touches nothing the
// coordinator uses. The new world's topology numbers the members 0..n-1 in
// `ranks` order; its local ranks are the members on this rank's node.
using MakeSubset = std::function<Status(int32_t id, const std::vector<int>& ranks, World* out)>;

struct World {
  std::unique_ptr<ControlPlane> control;
  std::unique_ptr<PointToPoint> p2p;  // null if the world has no point-to-point verbs
  // Collective transports in the world's own order. Ones built over `p2p` (the
  // ring) hold a reference to it, so they are destroyed first (declared after).
  std::vector<std::unique_ptr<Transport>> transports;
  // The device transport's other face (one of `transports`), or null when this
  // world cannot take device tensors.
  DeviceSupport* device_support = nullptr;
  // Host memory for kolo's outputs; set where ranks share a node.
  HostMemory host_outputs;
  // Runs once after the coordinator has stopped and the transports are gone
  // (e.g. MPI_Finalize when kolo initialised MPI). May be empty.
  std::function<void()> finalize;
  // Builds a process set's world from this one; empty where this world cannot
  // (a process set's own world: sets are made from the global world only).
  MakeSubset make_subset;

  World() = default;
  World(World&& o) noexcept
      : control(std::move(o.control)),
        p2p(std::move(o.p2p)),
        transports(std::move(o.transports)),
        device_support(o.device_support),
        host_outputs(o.host_outputs),
        finalize(std::move(o.finalize)),
        make_subset(std::move(o.make_subset)) {
    o.device_support = nullptr;
    o.make_subset = nullptr;
    o.finalize = nullptr;  // a moved-from std::function need not be empty
  }
  // Releases this world (in order, running its finalize) before taking the other.
  World& operator=(World&& o) noexcept {
    if (this != &o) {
      release();
      control = std::move(o.control);
      p2p = std::move(o.p2p);
      transports = std::move(o.transports);
      device_support = o.device_support;
      o.device_support = nullptr;
      host_outputs = o.host_outputs;
      finalize = std::move(o.finalize);
      o.finalize = nullptr;
      make_subset = std::move(o.make_subset);
      o.make_subset = nullptr;
    }
    return *this;
  }
  ~World() { release(); }

  // The collective part of a world's teardown: destroys the transports, the
  // point-to-point verbs and the control plane, keeping `finalize` for the
  // destructor. core::Runtime calls it on its coordinator thread once every
  // rank has stopped (Note [Shutdown without waiting for the others]).
  void release_transports() {
    make_subset = nullptr;  // it may hold what the control plane uses
    device_support = nullptr;
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

// Note [A process set is a world]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A process set negotiates on its own: its own pending table, response cache,
// cycle and stall inspector, so a set whose names stall never holds up another,
// and a name may be in flight in two sets at once. The cut that gives all of that
// without a second code path is to make a set's ranks a world of their own (an
// MPI communicator over the members, their own node layer on each node, the
// set's nodes for hierarchical) and to run the unchanged core on it: each set has
// its own coordinator thread, since a set's negotiation cycle is a blocking
// collective over its members, and one thread serving overlapping sets would have
// to order every set's cycles alike on every rank (Horovod runs every set's
// negotiation every cycle for that reason). Idle coordinators sleep on their
// doorbell, so a set costs a sleeping thread, its fusion buffer and its window.

}  // namespace kolo::transport
