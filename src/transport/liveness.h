// Liveness: whether the ranks a wait depends on are still there. Every world
// bounds its waits with one (Note [Waits consult liveness]); the node layer
// (transports/shm) gives the node's half, a world adds its remote half.
//
// check() is called between the tests of every wait (often: an implementation
// answers from a clock read most of the time); it returns OK, or the error that
// ends the wait — once a peer has failed, for good. failed() tells teardown to
// skip steps that would wait for a dead rank forever. A null Liveness* means "no
// check". Called by one thread at a time (the thread in kolo_init, then the
// coordinator), unless an implementation says otherwise.
#pragma once

#include <chrono>
#include <string>

#include "common/status.h"

namespace kolo::transport {

class Liveness {
 public:
  virtual ~Liveness() = default;
  virtual Status check() = 0;
  // As check(), but looking now rather than answering from a recent look, where
  // looking is cheap enough to do after every completed wait (Note [A completed
  // wait asks liveness too], transports/mpi/mpi_wait.h).
  virtual Status check_now() { return check(); }
  virtual bool failed() const = 0;
  // How often a rank with nothing to wait for must still call check() (its
  // peers hear from it through check()); max() when never.
  virtual std::chrono::milliseconds check_every() const { return std::chrono::milliseconds::max(); }
};

// A Liveness for the steps of kolo_init that run before a world's own liveness
// check exists: fails once `limit` has passed since construction, naming `what`.
class Deadline : public Liveness {
 public:
  Deadline(std::chrono::steady_clock::duration limit, std::string what);
  Status check() override;
  bool failed() const override { return !status_.ok(); }

 private:
  std::chrono::steady_clock::time_point deadline_;
  std::chrono::steady_clock::duration limit_;
  std::string what_;
  Status status_;
};

// A Liveness reported a failure in this process: a world then skips the steps of
// its teardown that would wait for the dead rank forever (MPI_Finalize). Any thread.
void record_peer_failure();
bool peer_failed_in_this_process();

// Whether process `pid`'s main thread is in a tracing stop ('t' in /proc/<pid>/stat):
// a debugger holds it, which a liveness check does not count as a failure (Note [A
// debugger's stop is not a failure], transports/shm/board.h). False when unreadable.
bool held_by_debugger(int pid);

// Note [Waits consult liveness]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A dead peer is not reported by the means kolo waits on: an MPI request that
// needs it just never completes (MPICH 4, ch4), and a counter in shared memory
// that it would have written never moves. So every wait asks kolo's own
// liveness check between its tests, and the coordinator's idle loop asks it too;
// a dead or silent peer ends the wait with KOLO_ERR_RANK_FAILED. How the check
// knows is the world's business (transports/shm's NodeBoard for the node, the
// MPI world's PeerMonitor for the other nodes).

// Note [Silence is counted only while this process listens]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A peer is silent for S only if this process looked for its signs of life at
// least S after the last one and found none. A process that was stopped
// (SIGSTOP, a paused VM) or starved of CPU did not look: when it finds that its
// own last look (or beat) is older than two intervals, it gives every peer a
// full timeout from now instead of blaming them for its own absence. (Ranks of a
// host stopped and resumed together then do not declare each other dead; the
// peers that did give them up have sent notices, or closed their connections,
// which are read first.) Every Liveness that judges silence keeps this rule:
// shm::NodeBoard, liveness::TcpLiveness, the socket world's engine.

}  // namespace kolo::transport
