// PeerMonitor: kolo's liveness check over MPI — is every other rank of the world
// still running? The Liveness (transport/liveness.h) that every wait in
// transports/mpi and the shm engines consults, and that the coordinator's idle
// loop asks through the control plane.
//
// How it knows:
// - Ranks on this node: the node layer's board (shm::NodeBoard, transports/shm/
//   board.h): pid and heartbeat per local rank in the node's segment, kill(pid,
//   0), a heartbeat older than the timeout, and the rules of Note [A debugger's
//   stop is not a failure] and Note [Silence is counted only while this process
//   listens]. Its beater thread beats for this rank.
// - Ranks on other nodes are watched by a TcpLiveness (transports/liveness/
//   tcp_liveness.h), a TCP side channel of kolo's own whose addresses and job
//   token are exchanged here over MPI: a closed connection is a dead process
//   (noticed at once), silence for the timeout is a partition, and a verdict
//   reached anywhere is passed to every rank that can be reached. Not MPI
//   messages: Note [A side channel apart from MPI's progress]. Its thread beats
//   and listens, so nobody needs to call check() to be heard.
//
// Contract: create() is collective over the control communicator (kolo_init),
// after the node layer exists. check() is called by one thread at a time (the
// thread in kolo_init, then the coordinator). Once a peer has failed, check()
// returns the same KOLO_ERR_RANK_FAILED error (naming the ranks, node and remote
// alike) forever and failed() is true: the world's teardown then skips
// collective frees. A verdict of this node's board is passed to the other
// nodes' ranks too.
#pragma once

#include <mpi.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "transport/control_plane.h"
#include "transports/liveness/tcp_liveness.h"
#include "transports/mpi/mpi_wait.h"
#include "transports/shm/board.h"
#include "transports/shm/node.h"

namespace kolo::mpi {

class PeerMonitor : public Liveness {
 public:
  // `control`: the world's control communicator (duplicated here); `node`: the
  // world's node layer (its board watches the ranks on this node; null: every
  // peer is remote). `timeout`: KOLO_PEER_TIMEOUT_SECONDS. The steps before the
  // monitor runs are bounded by `timeout` too.
  static Status create(MPI_Comm control, const transport::Topology& topology,
                       std::shared_ptr<shm::Node> node, std::chrono::milliseconds timeout,
                       std::unique_ptr<PeerMonitor>* out);
  ~PeerMonitor() override;

  Status check() override;
  // The remote half looks now (a poll of the side channel's sockets); the node
  // half answers as check() does.
  Status check_now() override;
  bool failed() const override { return !failed_.ok() || (remote_ && remote_->failed()); }
  // The beat interval (a fifth of the timeout, at least 10 ms): an idle
  // coordinator looks this often, so it sees a verdict without a pending wait.
  std::chrono::milliseconds check_every() const override { return interval_; }

 private:
  PeerMonitor(std::chrono::milliseconds timeout, const transport::Topology& topology);
  Status start(MPI_Comm control, const std::shared_ptr<shm::Node>& node);
  Status start_remote(const std::vector<int>& node_ranks, Liveness* deadline);

  const std::chrono::milliseconds timeout_;
  const std::chrono::milliseconds interval_;
  const transport::Topology topology_;
  MPI_Comm comm_ = MPI_COMM_NULL;  // the exchange of the remote half's addresses
  std::unique_ptr<shm::NodeBoard> board_;  // the ranks on this node; null: none
  std::unique_ptr<liveness::TcpLiveness> remote_;  // the ranks on other nodes; null: none
  std::chrono::steady_clock::time_point next_check_{};
  Status failed_;
};

}  // namespace kolo::mpi
