// The node layer in the socket world: the ranks of a plane that share a host
// (Topology::node, from Note [Hosts in the socket world]) share one segment of
// transports/shm, made through the socket control plane as the MPI world makes
// it through its own (transports/mpi/mpi_world.cc is the model). From it the
// plane gets, through its node seam (node_seam.h):
//   - the node's doorbell (host peers rung through futexes, not sockets),
//   - the node AND when the whole plane is on this host (Note [The AND on one
//     node] in transports/shm/node_and.h),
//   - a Liveness that adds the node's board (pid and heartbeat of every host
//     peer: transports/shm/board.h) to the engine's verdicts from the sockets;
// and the world's factory gets the node for the "shm" engines.
//
// Contract: join_node() runs once per plane (the world's, each process set's),
// on the thread that made the plane, before anything is built over it;
// collective over the plane's members, with the same options on each. The
// node layer is optional: with `enabled` false, or where the segment cannot be
// made (no /dev/shm, a full one: the same verdict on every rank, Node::create
// settles it), the plane keeps the engine's doorbell, AND and Liveness, *node
// stays null and the world runs over the sockets alone (a warning says why). A
// failed peer fails join_node() with KOLO_ERR_RANK_FAILED.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>

#include "common/status.h"
#include "transports/shm/node.h"
#include "transports/socket/engine.h"
#include "transports/socket/socket_control_plane.h"

namespace kolo::socket {

struct NodeJoin {
  bool enabled = true;
  size_t shm_slot_bytes = size_t{64} << 20;  // the "shm" allreduce's slots (BuildOptions)
  std::chrono::milliseconds peer_timeout{10000};  // the board's
};

Status join_node(SocketControlPlane* control, const NodeJoin& options, std::shared_ptr<shm::Node>* node);

// The node layer's regions for a plane of this topology: the same on every rank.
// One host: the shm allreduce's and collectives' slots and the node AND. Several
// hosts: the hierarchical transport's slots (its node step), no AND.
shm::NodeOptions node_options(const transport::Topology& topology, size_t shm_slot_bytes);

}  // namespace kolo::socket
