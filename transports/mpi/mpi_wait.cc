#include "transports/mpi/mpi_wait.h"

#include "common/check.h"
#include "transports/mpi/mpi_check.h"

namespace kolo::mpi {

Status wait(MPI_Request* request, Liveness* alive, MPI_Status* status) {
  Waiter waiter;
  for (;;) {
    int done = 0;
    KOLO_MPI_CHECK(MPI_Test(request, &done, status));
    if (done) return Status::OK();
    if (alive) KOLO_RETURN_IF_ERROR_AS_IS(alive->check());
    waiter.pause();
  }
}

Status wait_all(MPI_Request* requests, int n, Liveness* alive) {
  // Waiting on each in turn costs nothing extra: a request that completed while
  // we waited on an earlier one passes its first test.
  for (int i = 0; i < n; ++i) KOLO_RETURN_IF_ERROR_AS_IS(wait(&requests[i], alive));
  return Status::OK();
}

Status arrive(MPI_Comm comm, Liveness* alive) {
  MPI_Request request;
  KOLO_MPI_CHECK(MPI_Ibarrier(comm, &request));
  return wait(&request, alive);
}

Status wait_for(MPI_Request* request, std::chrono::steady_clock::duration timeout,
                bool* done) {
  Waiter waiter(wait_profile(WaitFor::kPeer), std::chrono::steady_clock::now() + timeout);
  do {
    int flag = 0;
    KOLO_MPI_CHECK(MPI_Test(request, &flag, MPI_STATUS_IGNORE));
    *done = flag != 0;
  } while (!*done && waiter.pause());
  return Status::OK();
}

}  // namespace kolo::mpi
