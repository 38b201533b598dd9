// PeerMonitor: kolo's liveness check over MPI — is every other rank of the world
// still running? The Liveness (transport/liveness.h) that every wait in
// transports/mpi and the shm engines consults, and that the coordinator's idle
// loop asks through the control plane.
//
// How it knows:
// - Ranks on this node: the node layer's board (shm::NodeBoard, transports/shm/
//   board.h): pid and heartbeat per local rank in the node's segment, kill(pid,
//   0), a heartbeat older than the timeout, and the rule of Note [A debugger's
//   stop is not a failure]. Its beater thread beats for this rank.
// - Ranks on other nodes exchange heartbeat messages on the monitor's own
//   duplicate of the control communicator (one receive posted per remote peer,
//   one send to each at least every beat interval). A remote peer has failed
//   when nothing has arrived from it for the timeout.
// - The remote heartbeats come from a small thread of the monitor (one beat per
//   interval, a fifth of the timeout) when MPI allows calls from several threads
//   (MPI_THREAD_MULTIPLE, always so when kolo initialised MPI), so that a process
//   that runs beats whatever its other threads do, and a stopped or dead one does
//   not; otherwise check() sends them, and the coordinator calls check() between
//   the tests of every wait and at least every check_every() while idle
//   (MpiControlPlane caps its idle sleep at it).
//
// Contract: create() is collective over the control communicator (kolo_init),
// after the node layer exists. check() is called by one thread at a time (the
// thread in kolo_init, then the coordinator). Once a peer has failed, check()
// returns the same KOLO_ERR_RANK_FAILED error (naming the ranks, node and remote
// alike) forever and failed() is true: the world's teardown then skips
// collective frees.
#pragma once

#include <mpi.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "transport/control_plane.h"
#include "transports/mpi/mpi_wait.h"
#include "transports/shm/board.h"
#include "transports/shm/node.h"

namespace kolo::mpi {

class PeerMonitor : public Liveness {
 public:
  static constexpr int kHeartbeatTag = 2;

  // `control`: the world's control communicator (duplicated here); `node`: the
  // world's node layer (its board watches the ranks on this node; null: every
  // peer is remote). `timeout`: KOLO_PEER_TIMEOUT_SECONDS. The steps before the
  // monitor runs are bounded by `timeout` too.
  static Status create(MPI_Comm control, const transport::Topology& topology,
                       std::shared_ptr<shm::Node> node, std::chrono::milliseconds timeout,
                       std::unique_ptr<PeerMonitor>* out);
  ~PeerMonitor() override;

  Status check() override;
  bool failed() const override { return !failed_.ok(); }
  // The beat interval: a fifth of the timeout, at least 10 ms.
  std::chrono::milliseconds check_every() const override { return interval_; }

 private:
  struct Remote {
    int rank = 0;
    uint64_t in = 0;   // the posted receive's buffer
    uint64_t out = 0;  // the last send's buffer
    MPI_Request recv = MPI_REQUEST_NULL;
    MPI_Request send = MPI_REQUEST_NULL;
    std::chrono::steady_clock::time_point heard;
  };

  PeerMonitor(std::chrono::milliseconds timeout, const transport::Topology& topology);
  Status start(MPI_Comm control, const std::shared_ptr<shm::Node>& node);
  Status start_remote(const std::vector<int>& node_ranks);
  void send_remote(std::chrono::steady_clock::time_point now);
  void beat_loop();
  // Appends "rank r ..." to `why` for each failed remote peer.
  Status check_remote(std::chrono::steady_clock::time_point now, std::vector<std::string>* why);
  void release_requests();  // after the beater stopped

  const std::chrono::milliseconds timeout_;
  const std::chrono::milliseconds interval_;
  const transport::Topology topology_;
  MPI_Comm comm_ = MPI_COMM_NULL;  // for the remote heartbeats
  std::unique_ptr<shm::NodeBoard> board_;  // the ranks on this node; null: none
  std::vector<Remote> remotes_;
  std::chrono::steady_clock::time_point next_check_{};
  std::chrono::steady_clock::time_point next_send_{};
  uint64_t beats_ = 0;
  Status failed_;
  bool thread_sends_ = false;  // the beater sends the remote heartbeats
  std::thread beater_;
  std::mutex beater_mu_;
  std::condition_variable beater_cv_;
  bool stopping_ = false;
};

}  // namespace kolo::mpi
