// The polite wait: how kolo waits for every MPI request.
//
// MPICH's blocking calls busy-poll. With more ranks than cores (4 ranks on 2 cores
// in CI, or ranks sharing cores with framework threads) a spinning rank steals the
// core its peer needs to make progress: a blocking 4-rank MPI_Allreduce of 8 bytes
// measured 5.7 ms here, the same allreduce as MPI_Iallreduce + MPI_Test with a
// yield after ~16 unsuccessful tests 13 µs. So kolo never calls MPI_Wait or a
// blocking collective; it tests, and backs off:
//
//   tests 1..kSpinTests     MPI_Test back to back (a fast peer answers here)
//   then for kYieldFor      sched_yield() between tests (give a peer the core)
//   then                    sleep between tests, 1 µs doubling to kMaxSleep
//
// The yield phase is long (500 µs) because it is what makes oversubscribed ranks
// fast: a yield hands the core to a runnable peer at once and costs nothing when
// none is, while a sleep parks this rank even when its peer has already answered.
// Measured with 4 ranks on 2 busy cores, 8 B through the "mpi" transport: 22 to
// 350 µs with a 64-yield phase, 15-16 µs with 500 µs of yields. A rank that waits
// longer than that (an idle peer) sleeps and leaves the core alone.
//
// The sleep never grows beyond ~50 µs, so a wait that ends late costs at most one
// sleep of latency. Linux pads every sleep by the thread's timer slack (50 µs by
// default; a 1 µs sleep measured 109 µs on a loaded 2-core machine, 17 µs with a
// 1 µs slack), so while a Backoff sleeps it lowers the calling thread's slack to
// 1 µs, and restores it when the Backoff is destroyed.
//
// The functions here are not thread-safe on the same request; kolo calls them
// from the coordinator thread.
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstdint>

#include "common/status.h"

namespace kolo::mpi {

// The back-off schedule above, one pause() per unsuccessful test.
class Backoff {
 public:
  static constexpr int kSpinTests = 32;
  static constexpr std::chrono::microseconds kYieldFor{500};
  static constexpr std::chrono::microseconds kMaxSleep{50};

  Backoff() = default;
  Backoff(const Backoff&) = delete;
  Backoff& operator=(const Backoff&) = delete;
  ~Backoff();  // restores the thread's timer slack if pause() lowered it

  void pause();

 private:
  int tests_ = 0;
  int64_t sleep_us_ = 1;
  std::chrono::steady_clock::time_point yield_until_;
  bool slack_lowered_ = false;
  unsigned long saved_slack_ns_ = 0;
};

// Waits until `*request` completes (it becomes MPI_REQUEST_NULL). MPI_REQUEST_NULL
// completes at once. `status` may be MPI_STATUS_IGNORE.
Status wait(MPI_Request* request, MPI_Status* status = MPI_STATUS_IGNORE);

// Waits until every request in requests[0..n) completes. Stops at the first
// request that fails and returns its error (the others are left as they are).
Status wait_all(MPI_Request* requests, int n);

// Waits until `*counter`, a word in memory shared with other processes of the node
// that only grows, is at least `target`: up to `spin_loads` acquire loads with a
// pause between them, then the Backoff above. Answers false if `timeout` passed
// first. For the shared-memory engines (shm_transport.h, node_and.h).
bool wait_for_counter(const uint64_t* counter, uint64_t target, int spin_loads,
                      std::chrono::steady_clock::duration timeout);

// Like wait(), but gives up after `timeout`: *done says whether it completed.
// For shutdown paths that must not hang on a peer that is gone.
Status wait_for(MPI_Request* request, std::chrono::steady_clock::duration timeout, bool* done);

}  // namespace kolo::mpi
