#include "transports/mpi/mpi_wait.h"

#include <atomic>
#include <thread>

#include "common/check.h"
#include "transports/mpi/mpi_check.h"
#include "transports/mpi/node_counter.h"

namespace kolo::mpi {

namespace {
std::atomic<bool> g_peer_failed{false};
// The longest sleep on a counter between liveness checks (a wake-up ends it early).
constexpr int64_t kSleepSliceUs = 2000;
// How long an MPI error waits for liveness to name a failed peer.
constexpr auto kExplainFor = std::chrono::milliseconds(200);
}  // namespace

void record_peer_failure() { g_peer_failed.store(true, std::memory_order_release); }
bool peer_failed_in_this_process() { return g_peer_failed.load(std::memory_order_acquire); }

Deadline::Deadline(std::chrono::steady_clock::duration limit, std::string what)
    : deadline_(std::chrono::steady_clock::now() + limit), limit_(limit), what_(std::move(what)) {}

Status Deadline::check() {
  if (status_.ok() && std::chrono::steady_clock::now() > deadline_) {
    const double seconds = std::chrono::duration<double>(limit_).count();
    status_ = Status(Code::kRankFailed, what_ + ": not every rank arrived within " +
                                            std::to_string(seconds) + " s (a rank died or hangs)");
    record_peer_failure();
  }
  return status_;
}

Status wait(MPI_Request* request, Liveness* alive, MPI_Status* status) {
  // Note [No MPI progress after a verdict].
  if (alive && alive->failed()) return alive->check();
  Backoff backoff;
  for (;;) {
    int done = 0;
    const int rc = MPI_Test(request, &done, status);
    if (rc != MPI_SUCCESS)
      return explain_mpi_error(mpi_error(rc, "MPI_Test", __FILE__, __LINE__), alive);
    // Note [A completed wait asks liveness too].
    if (done) return alive ? alive->check() : Status::OK();
    if (alive) KOLO_RETURN_IF_ERROR_AS_IS(alive->check());
    backoff.pause();
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

Status wait_for_counter(const uint64_t* counter, uint64_t target, int spin_loads,
                        Liveness* alive) {
  for (int i = 0; i < spin_loads; ++i) {
    if (__atomic_load_n(counter, __ATOMIC_ACQUIRE) >= target) return Status::OK();
    __builtin_ia32_pause();
  }
  // Note [Waiting for a counter in the kernel] (node_counter.h): the Backoff's
  // spin and yields first, on every node, then the kernel.
  // Liveness is consulted once the Backoff stops spinning (its 32 polls): a
  // check reads the clock, and a peer just a little late should not cost one
  // read per poll. From the first yield on, every pass checks, as before.
  Backoff backoff;
  for (;;) {
    const uint64_t seen = __atomic_load_n(counter, __ATOMIC_ACQUIRE);
    if (seen >= target) return Status::OK();
    if (alive && backoff.done_spinning()) KOLO_RETURN_IF_ERROR_AS_IS(alive->check());
    if (backoff.pause_awake()) continue;
    sleep_on_counter(counter, seen, kSleepSliceUs);
  }
}

Status arrive(MPI_Comm comm, Liveness* alive) {
  MPI_Request request;
  KOLO_MPI_CHECK(MPI_Ibarrier(comm, &request));
  return wait(&request, alive);
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
