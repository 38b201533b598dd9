// NodeBoard: the node's half of kolo's liveness check — is every other rank of
// this node still running? A transport::Liveness over the board lines of the
// node's segment (node.h), which any world uses for its node peers and
// combines with its own check of the other nodes (the MPI world's PeerMonitor).
//
// How it knows: each local rank's board line holds its world rank, pid and
// heartbeat (the CLOCK_MONOTONIC time of its last beat, on the clock every
// process of a node shares). A node peer has failed when its process is gone
// (kill(pid, 0) answers ESRCH; only for pids this process could see at
// creation, so separate pid namespaces fall back to the heartbeat) or when its
// heartbeat is older than the timeout (a stopped or hung process), unless a
// debugger holds it (Note [A debugger's stop is not a failure]) or this
// process was away itself (Note [Silence is counted only while this process
// listens] in transport/liveness.h: a beat late by more than two intervals).
//
// The beats come from a small thread of the board (one beat per interval, a
// fifth of the timeout), so a process beats whatever its other threads do, and
// a stopped or dead one does not; check() beats too.
//
// Contract: made after Node::create (local; no collective). check() and
// find_failed() are called by one thread at a time (the thread in kolo_init,
// then the coordinator). Once a peer has failed, check() returns the same
// KOLO_ERR_RANK_FAILED error (naming the ranks) forever and failed() is true.
// The destructor stops the beater. Not copyable.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"
#include "transport/liveness.h"
#include "transports/shm/node.h"

namespace kolo::shm {

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

class NodeBoard : public transport::Liveness {
 public:
  // The board lines of `node`'s ranks; `timeout`: KOLO_PEER_TIMEOUT_SECONDS. Starts
  // the beater when the node has peers. Errors: a timeout that is not positive,
  // the board already in use.
  static Status create(std::shared_ptr<Node> node, std::chrono::milliseconds timeout,
                       std::unique_ptr<NodeBoard>* out);
  ~NodeBoard() override;

  Status check() override;
  bool failed() const override { return !failed_.ok(); }
  // The beat interval: a fifth of the timeout, at least 10 ms.
  std::chrono::milliseconds check_every() const override { return interval_; }

  // For a world that combines this board with its own check (no rate limit):
  // beats, then appends "rank r (pid p on this node) ..." to `why` for each
  // failed node peer, leaving out the ranks r (as introduced) for which
  // `left_in_order(r)` says the world knows they left (the socket world's bye).
  void find_failed(std::vector<std::string>* why,
                   const std::function<bool(int rank)>& left_in_order = nullptr);

  // Node::create: writes this rank's line (world rank, pid, a first beat).
  static void introduce(char* line, int world_rank);

 private:
  NodeBoard(std::shared_ptr<Node> node, std::chrono::milliseconds timeout);
  void beat();
  void beat_loop();

  std::shared_ptr<Node> node_;
  const std::chrono::milliseconds timeout_;
  const std::chrono::milliseconds interval_;
  std::vector<bool> pid_visible_;   // by local rank
  std::vector<int64_t> traced_ns_;  // by local rank: when last seen held by a debugger
  std::atomic<int64_t> last_beat_ns_{0};  // this rank's last beat (the beater or check())
  std::atomic<int64_t> resumed_ns_{0};    // when it came back from being away
  std::chrono::steady_clock::time_point next_check_{};
  Status failed_;
  std::thread beater_;
  std::mutex beater_mu_;
  std::condition_variable beater_cv_;
  bool stopping_ = false;
};

// The beat interval for `timeout`: a fifth of it (four beats can be late before
// a peer is declared silent), never below 10 ms (idle coordinators wake this
// often). The MPI world's PeerMonitor looks this often too.
std::chrono::milliseconds beat_interval(std::chrono::milliseconds timeout);

}  // namespace kolo::shm
