#include "transports/mpi/mpi_wait.h"

#include <chrono>
#include <thread>

#include "common/check.h"
#include "transports/mpi/mpi_check.h"

namespace kolo::mpi {

namespace {
// How long an MPI error waits for liveness to name a failed peer.
constexpr auto kExplainFor = std::chrono::milliseconds(200);
}  // namespace

Status wait(MPI_Request* request, Liveness* alive, MPI_Status* status) {
  // Note [No MPI progress after a verdict].
  if (alive && alive->failed()) return alive->check();
  Waiter waiter;
  for (;;) {
    int done = 0;
    const int rc = MPI_Test(request, &done, status);
    if (rc != MPI_SUCCESS)
      return explain_mpi_error(mpi_error(rc, "MPI_Test", __FILE__, __LINE__), alive);
    // Note [A completed wait asks liveness too].
    if (done) return alive ? alive->check_now() : Status::OK();
    if (alive) KOLO_RETURN_IF_ERROR_AS_IS(alive->check());
    waiter.pause();
  }
}

Status explain_mpi_error(Status error, Liveness* alive) {
  if (alive == nullptr) return error;
  // Note [An MPI error while a peer fails].
  const auto until = std::chrono::steady_clock::now() + kExplainFor;
  do {
    Status verdict = alive->check();
    if (!verdict.ok()) return verdict;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  } while (std::chrono::steady_clock::now() < until);
  return error;
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
