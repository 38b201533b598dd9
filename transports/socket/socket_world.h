// The socket world: kolo's control plane, point-to-point verbs and transports
// over TCP, for ranks that meet through a rendezvous store — no MPI, no
// mpiexec (torchrun, kolorun, or any launcher that gives each rank its rank,
// the world size and the store's address).
//
// create_world, on every rank (each step bounded by init_timeout):
//   1. the store: a TCP store at store_host:store_port — rank 0 serves it there
//      (TcpStoreServer::shared) unless something already listens (a launcher's),
//      or this process serves it already — or a file store in store_directory;
//   2. this rank listens on its address (KOLO_SOCKET_IFNAME's, else the one its
//      store connection leaves from, else 127.0.0.1 for a file store; never
//      every interface), port chosen by the system;
//   3. rendezvous.h: every rank's record, under "kolo/g<generation>/w<n>/"
//      (Note [Worlds of one generation]), with the checks that make a mismatch
//      fail clearly;
//   4. mesh.h: one connection per pair, with the handshake; rank 0 then
//      deletes the world's keys (every rank has read them: it connected);
//   5. the engine (its progress thread), the topology (Note [Hosts in the
//      socket world]), the control plane, kolo_init's agreement (`agree`), the
//      point-to-point verbs, and the transports the registry builds over
//      SocketFactory. Process sets are channels over the same connections.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "common/status.h"
#include "transport/registry.h"
#include "transport/world.h"
#include "transports/socket/store.h"

namespace kolo::socket {

struct SocketWorldOptions {
  // The store: a TCP store at store_host:store_port, or, when store_directory
  // is set, a file store there. `store` (tests) replaces both; not owned.
  std::string store_host;
  uint16_t store_port = 0;
  std::string store_directory;
  Store* store = nullptr;
  bool serve_store = true;  // rank 0 serves the TCP store unless one is there
  int rank = -1;
  int size = 0;
  std::string token;        // KOLO_JOB_TOKEN (Note [The job token] in frame.h)
  uint64_t generation = 0;  // Note [Generations] in frame.h
  std::string ifname;       // KOLO_SOCKET_IFNAME; empty: the address that reaches the store
  // LOCAL_RANK and LOCAL_WORLD_SIZE when the launcher gave them (-1: not given).
  int local_rank = -1;
  int local_size = -1;
  int test_node_size = 0;   // KOLO_TEST_NODE_SIZE: pretend nodes of this many ranks
  std::chrono::milliseconds init_timeout{300000};  // KOLO_INIT_TIMEOUT_SECONDS
  std::chrono::milliseconds peer_timeout{10000};   // KOLO_PEER_TIMEOUT_SECONDS
  transport::BuildOptions build{size_t{64} << 20, false};
  // Runs on every rank once the control plane exists, before any transport is
  // built: kolo_init's agreement (core/init_agreement.h).
  std::function<Status(transport::ControlPlane&)> agree;
};

Status create_world(const SocketWorldOptions& options, transport::World* world);

// Note [Worlds of one generation]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A process may make several worlds in one generation (kolo_init, kolo_shutdown,
// kolo_init: every test of the C API suite does), and the store outlives them
// (rank 0 serves it for the life of its process). So each world's keys live
// under "w<n>/", where n is the rank's own count of worlds in this generation,
// kept in the store ("kolo/g<generation>/worlds/rank/<r>", add 1 per world):
// like kolo_init itself, every rank makes its n-th world together with the
// others' n-th, so their n agree, whether ranks are processes or threads.

// Note [Hosts in the socket world]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Ranks share a node when they say so: with LOCAL_RANK and LOCAL_WORLD_SIZE
// (torchrun gives both, and numbers a node's ranks consecutively) a rank's node
// is the block of ranks from rank - LOCAL_RANK; without them, ranks on one host
// name share a node; with KOLO_TEST_NODE_SIZE=k, as in the MPI world, ranks
// r / k share a pretend node. Nodes are numbered by their lowest rank; a node's
// ranks get local ranks in rank order; cross_rank/cross_size number the ranks of
// equal local rank.

}  // namespace kolo::socket
