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

// An MPI call failed while waiting on peers: if `alive` names a failed peer
// within a short while, that verdict, else `error` as it is. Note [An MPI error
// while a peer fails].
Status explain_mpi_error(Status error, Liveness* alive);

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

// Note [A completed wait asks liveness too]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A wait that completes asks liveness once more before it reports success. A rank
// stopped (SIGSTOP) past the timeout is given up by its peers, which tell it so
// (tcp_liveness.h); when it resumes, its pending request may complete at once —
// with data a peer sent before giving up, or that a peer's abandoned request sent
// later — before any check ran. Asking after completion reads the peers' notice
// first (the check looks at once when its listener was away too), so the
// operation fails like every other rank's instead of resuming half-way. It is
// check_now(), which reads the side channel's sockets at once: MPICH over UCX was
// seen completing collectives with wrong sums and MPI_SUCCESS for milliseconds
// after a peer on another host was killed, before the side channel's thread had
// read the closed connection (the kernel had it at once). It costs a poll over
// the remote peers' sockets, nothing on one node.

// Note [An MPI error while a peer fails]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// MPI can see a dead peer first: UCX reads the killed process's closed TCP
// connection and MPICH fails the request ("Invalid communicator", "Endpoint
// timeout"), a KOLO_ERR_TRANSPORT that names no rank. kolo's liveness sees the
// same closed connection within microseconds to milliseconds; an MPI error met in
// a wait is therefore held for up to 200 ms while liveness is asked, and its
// verdict (KOLO_ERR_RANK_FAILED naming the rank) is returned if it comes.

// Note [No MPI progress after a verdict]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A wait that ends on a verdict leaves its MPI requests as they are, and the
// buffers they point into (a control plane's locals, a negotiation's vector) are
// then freed. Any later MPI call that progresses (MPI_Test, a cancel waited for)
// lets MPI write what a peer had already sent into that freed memory: a resumed
// rank crashed in free() at thread exit (heap corruption), and a survivor's late
// progress sent a resumed peer data from freed buffers. So once liveness has
// failed, kolo makes no MPI call that progresses: wait() answers the verdict
// without testing, and teardown leaks what MPI still owns instead of cancelling
// and waiting. (MPI_Comm_free and MPI_Request_free stay: they free handles.)

}  // namespace kolo::mpi
