// PeerMonitor: kolo's liveness check over MPI — is every other rank of the world
// still running? The Liveness (mpi_wait.h) that every wait in transports/mpi
// consults, and that the coordinator's idle loop asks through the control plane.
//
// How it knows:
// - Ranks on this node share a board (an MPI-3 shared window, one cache line per
//   local rank) holding each rank's world rank, pid and heartbeat: the
//   CLOCK_MONOTONIC time of its last check(), which every process of a node reads
//   on the same clock. A node peer has failed when its process is gone
//   (kill(pid, 0) answers ESRCH; only for pids this process could see at
//   create(), so separate pid namespaces fall back to the heartbeat) or when its
//   heartbeat is older than the timeout (a stopped or hung process), unless a
//   debugger holds it (Note [A debugger's stop is not a failure]).
// - Ranks on other nodes exchange heartbeat messages on the monitor's own
//   duplicate of the control communicator (one receive posted per remote peer,
//   one send to each at least every beat interval). A remote peer has failed
//   when nothing has arrived from it for the timeout.
// - The heartbeats come from a small thread of the monitor (one beat per
//   interval, a fifth of the timeout), so a process that runs beats whatever its
//   other threads do, and a stopped or dead one does not. That thread also sends
//   the remote heartbeats when MPI allows calls from several threads
//   (MPI_THREAD_MULTIPLE, always so when kolo initialised MPI); otherwise check()
//   sends them, and the coordinator calls check() between the tests of every
//   wait and at least every check_every() while idle (MpiControlPlane caps its
//   idle sleep at it).
//
// Contract: create() is collective over the control communicator (kolo_init).
// check() is called by one thread at a time (the thread in kolo_init, then the
// coordinator). Once a peer has failed, check() returns the same
// KOLO_ERR_RANK_FAILED error (naming the ranks) forever and failed() is true:
// the world's teardown then skips collective frees. The destructor frees the
// board collectively only if no peer failed.
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
#include "transports/mpi/shm_window.h"

namespace kolo::mpi {

// Note [A debugger's stop is not a failure]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// gdb -p stops every thread of a rank while it loads symbols (15 s for a Python
// process with torch, measured on the shared machine), so looking at a stalled
// job with a debugger made the other ranks declare the rank silent, fail and exit:
// the stall turned into a false KOLO_ERR_RANK_FAILED and the evidence was gone. A
// node peer whose process is in a tracing stop ('t' in /proc/<pid>/stat) is
// therefore not failed however old its heartbeat; a plain SIGSTOP ('T') still is.
// Its silence counts from the last time it was seen held, since a released rank's
// beater runs only after its threads are let go (the main thread first). The proc
// file is read only once a heartbeat is older than the timeout.

class PeerMonitor : public Liveness {
 public:
  static constexpr int kHeartbeatTag = 2;

  // `control`: the world's control communicator (duplicated here); `local`: the
  // node communicator or MPI_COMM_NULL. `timeout`: KOLO_PEER_TIMEOUT_SECONDS.
  // The steps before the monitor runs are bounded by `timeout` too.
  static Status create(MPI_Comm control, MPI_Comm local, const transport::Topology& topology,
                       std::chrono::milliseconds timeout, std::unique_ptr<PeerMonitor>* out);
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
  struct Board;

  PeerMonitor(std::chrono::milliseconds timeout, const transport::Topology& topology);
  Status start(MPI_Comm control, MPI_Comm local);
  Status start_remote();
  void beat_node();
  void send_remote(std::chrono::steady_clock::time_point now);
  void beat_loop();
  // Appends "rank r ..." to `why` for each failed peer.
  void check_node(std::vector<std::string>* why);
  Status check_remote(std::chrono::steady_clock::time_point now, std::vector<std::string>* why);
  void release_requests();  // after the beater stopped

  const std::chrono::milliseconds timeout_;
  const std::chrono::milliseconds interval_;
  const transport::Topology topology_;
  MPI_Comm comm_ = MPI_COMM_NULL;  // for the remote heartbeats
  std::unique_ptr<ShmWindow> window_;
  std::vector<bool> pid_visible_;  // by local rank
  std::vector<int64_t> traced_ns_;  // by local rank: when last seen held by a debugger
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
