// MpiWork: the MPI requests of one operation as a transport::Work, shared by the
// "mpi" transport's allreduce (one request per slice) and its other collectives.
#pragma once

#include <mpi.h>

#include <vector>

#include "common/status.h"
#include "transport/transport.h"

namespace kolo::mpi {

// Contract: add() the requests as they are posted; record a failed start with
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
  MpiWork() = default;
  MpiWork(const MpiWork&) = delete;
  MpiWork& operator=(const MpiWork&) = delete;
  ~MpiWork() override { finish(); }

  bool test() override;
  Status wait() override;

  void add(MPI_Request request) { requests_.push_back(request); }
  void fail(Status status);

 protected:
  // Waits for the requests unless they are done or MPI is finalized.
  void finish();

 private:
  std::vector<MPI_Request> requests_;
  Status status_;
  bool done_ = false;
};

}  // namespace kolo::mpi
