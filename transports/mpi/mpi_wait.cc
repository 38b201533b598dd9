#include "transports/mpi/mpi_wait.h"

#include "transports/mpi/mpi_check.h"

namespace kolo::mpi {

Status wait(MPI_Request* request, MPI_Status* status) {
  Backoff backoff;
  for (;;) {
    int done = 0;
    KOLO_MPI_CHECK(MPI_Test(request, &done, status));
    if (done) return Status::OK();
    backoff.pause();
  }
}

Status wait_all(MPI_Request* requests, int n) {
  // Waiting on each in turn costs nothing extra: a request that completed while
  // we waited on an earlier one passes its first test.
  for (int i = 0; i < n; ++i) KOLO_RETURN_IF_ERROR(wait(&requests[i]));
  return Status::OK();
}

bool wait_for_counter(const uint64_t* counter, uint64_t target, int spin_loads,
                      std::chrono::steady_clock::duration timeout) {
  for (int i = 0; i < spin_loads; ++i) {
    if (__atomic_load_n(counter, __ATOMIC_ACQUIRE) >= target) return true;
    __builtin_ia32_pause();
  }
  if (__atomic_load_n(counter, __ATOMIC_ACQUIRE) >= target) return true;
  // Yields, then sleeps: ranks may outnumber cores.
  Backoff backoff(Backoff::kPeer, std::chrono::steady_clock::now() + timeout);
  while (__atomic_load_n(counter, __ATOMIC_ACQUIRE) < target) {
    if (!backoff.pause()) return false;
  }
  return true;
}

Status wait_for(MPI_Request* request, std::chrono::steady_clock::duration timeout,
                bool* done) {
  Backoff backoff(Backoff::kPeer, std::chrono::steady_clock::now() + timeout);
  do {
    int flag = 0;
    KOLO_MPI_CHECK(MPI_Test(request, &flag, MPI_STATUS_IGNORE));
    *done = flag != 0;
  } while (!*done && backoff.pause());
  return Status::OK();
}

}  // namespace kolo::mpi
