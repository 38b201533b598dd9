// The polite wait: how kolo waits for every MPI request.
//
// MPICH's blocking calls busy-poll. With more ranks than cores (4 ranks on 2 cores
// in CI, or ranks sharing cores with framework threads) a spinning rank steals the
// core its peer needs to make progress: a blocking 4-rank MPI_Allreduce of 8 bytes
// measured 5.7 ms here, the same allreduce as MPI_Iallreduce + MPI_Test with a
// yield after ~16 unsuccessful tests 13 µs. So kolo never calls MPI_Wait or a
// blocking collective; it tests, and backs off between tests (common/backoff.h,
// Backoff::kPeer: spin, then yield for 500 µs, then sleep up to 50 µs).
//
// The functions here are not thread-safe on the same request; kolo calls them
// from the coordinator thread.
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstdint>

#include "common/backoff.h"
#include "common/status.h"

namespace kolo::mpi {

// Waits until `*request` completes (it becomes MPI_REQUEST_NULL). MPI_REQUEST_NULL
// completes at once. `status` may be MPI_STATUS_IGNORE.
Status wait(MPI_Request* request, MPI_Status* status = MPI_STATUS_IGNORE);

// Waits until every request in requests[0..n) completes. Stops at the first
// request that fails and returns its error (the others are left as they are).
Status wait_all(MPI_Request* requests, int n);

// Waits until `*counter`, a word in memory shared with other processes of the node
// that only grows, is at least `target`: up to `spin_loads` acquire loads with a
// pause between them, then a Backoff. Answers false if `timeout` passed
// first. For the shared-memory engines (shm_transport.h, node_and.h).
bool wait_for_counter(const uint64_t* counter, uint64_t target, int spin_loads,
                      std::chrono::steady_clock::duration timeout);

// Like wait(), but gives up after `timeout`: *done says whether it completed.
// For shutdown paths that must not hang on a peer that is gone.
Status wait_for(MPI_Request* request, std::chrono::steady_clock::duration timeout, bool* done);

}  // namespace kolo::mpi
