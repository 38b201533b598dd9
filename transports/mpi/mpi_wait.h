// The polite wait: how kolo waits for every MPI request.
//
// MPICH's blocking calls busy-poll. With more ranks than cores (4 ranks on 2 cores
// in CI, or ranks sharing cores with framework threads) a spinning rank steals the
// core its peer needs to make progress: a blocking 4-rank MPI_Allreduce of 8 bytes
// measured 5.7 ms here, the same allreduce as MPI_Iallreduce + MPI_Test with a
// yield after ~16 unsuccessful tests 13 µs. So kolo never calls MPI_Wait or a
// blocking collective; it tests, and pauses between tests (a Waiter with the
// WaitFor::kPeer profile: spin, then yield for 500 µs, then sleep up to 50 µs).
//
// Every wait is bounded by liveness (Note [Waits consult liveness] in
// transport/liveness.h): between tests it asks a Liveness whether every peer is
// still there, and ends with that error when one is not. The pause
// (common/wait_policy.h) and the liveness check are separate: a wait is "test,
// consult liveness, pause".
//
// The functions here are not thread-safe on the same request; kolo calls them
// from the coordinator thread.
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <string>

#include "common/wait_policy.h"
#include "common/status.h"
#include "transport/liveness.h"

namespace kolo::mpi {

// The Liveness every wait consults (transport/liveness.h): the world's
// PeerMonitor (peer_monitor.h), or a Deadline during kolo_init.
using transport::Deadline;
using transport::Liveness;
using transport::peer_failed_in_this_process;
using transport::record_peer_failure;

// Waits until `*request` completes (it becomes MPI_REQUEST_NULL) or `alive`
// reports a failure (the request is then left as it is). MPI_REQUEST_NULL
// completes at once. `status` may be MPI_STATUS_IGNORE.
Status wait(MPI_Request* request, Liveness* alive, MPI_Status* status = MPI_STATUS_IGNORE);

// Waits until every request in requests[0..n) completes. Stops at the first
// request that fails and returns its error (the others are left as they are).
Status wait_all(MPI_Request* requests, int n, Liveness* alive);

// A non-blocking barrier over `comm`, waited with `alive`. kolo_init runs one
// before each blocking collective (MPI_Comm_split), so
// that those start only once every rank has arrived and a rank that died before
// is reported instead of waited for forever.
Status arrive(MPI_Comm comm, Liveness* alive);

// Like wait(), but gives up after `timeout`: *done says whether it completed.
// For shutdown paths that must not hang on a peer that is gone.
Status wait_for(MPI_Request* request, std::chrono::steady_clock::duration timeout, bool* done);

}  // namespace kolo::mpi
