// MpiWork: the MPI requests of one operation as a transport::Work, shared by the
// "mpi" transport's allreduce (one request per slice) and its other collectives.
#pragma once

#include <mpi.h>

#include <vector>

#include "common/status.h"
#include "transport/transport.h"
#include "transports/mpi/mpi_wait.h"

namespace kolo::mpi {

// Contract: add() the requests as they are posted; waits consult `alive`
// (Note [Waits consult liveness]), so a failed peer ends wait() and the
// destructor's wait with its error (the requests are then left to MPI); record a failed start with
// fail() (the requests already posted are still waited for). test() polls them
// all with MPI_Testall and never blocks; wait() finishes them with the polite
// wait (mpi_wait.h) and returns OK or the error of a failed start, MPI_Testall
// or wait (a failed test replaces an earlier error, as it ends the work).
// Destroying an unfinished MpiWork waits for its requests (MPI must not outlive
// the buffers they use) unless MPI is already finalized. A subclass that owns
// buffers MPI reads must call finish() in its own destructor: its members are
// destroyed before this destructor runs. Not thread-safe.
class MpiWork : public transport::Work {
 public:
  explicit MpiWork(Liveness* alive) : alive_(alive) {}
  MpiWork(const MpiWork&) = delete;
  MpiWork& operator=(const MpiWork&) = delete;
  ~MpiWork() override { finish(); }

  bool test() override;
  Status wait() override;

  void add(MPI_Request request) { requests_.push_back(request); }
  void fail(Status status);
  // Whether a wait ended (a failed peer) with requests MPI still holds: buffers
  // they use must then outlive this work (a subclass leaks them).
  bool abandoned() const { return abandoned_; }

 protected:
  // Waits for the requests unless they are done or MPI is finalized.
  void finish();

 private:
  Liveness* alive_;
  std::vector<MPI_Request> requests_;
  Status status_;
  bool done_ = false;
  bool abandoned_ = false;
};

}  // namespace kolo::mpi
