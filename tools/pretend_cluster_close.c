/* Preloaded into every process of an isolated pretend cluster by tools/pretend_cluster.sh
 * (built there with cc into the cluster's state directory; no headers needed).
 *
 * Note [A close that waits for a peer in the PMI barrier]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * MPICH 4.0.2's MPI_Finalize (ch4:ucx) closes every UCX endpoint with ucp_disconnect_nb
 * (a flushing close), progresses until every close completes, and only then enters the
 * PMI barrier, where it blocks in read() and progresses nothing. Over TCP a flushing
 * close (and even a plain ucp_ep_flush) can need an answer from the peer: an endpoint
 * whose TCP connection was never used still has its handshake to finish, and a PUT still
 * waits for its ack. When the peer has already finished its own closes and sits in the
 * PMI barrier, the answer never comes: the rank spins in ucp_worker_progress forever
 * with the peer's 25 unread bytes in the peer's socket (seen with gdb and ss). Newer
 * MPICH enters a PMI barrier before closing, which narrows the window but does not
 * close it.
 * So a disconnect request that has not completed within KOLO_CLUSTER_CLOSE_GRACE_MS
 * (default 2000) of the first close is reported complete to MPICH, which then releases
 * it and destroys the worker. It is safe for the case it exists for: every rank is in
 * MPI_Finalize, so every message of the program has been received (MPI requires all
 * communication to be complete before MPI_Finalize), and a peer that answers nothing
 * is past its own closes. A close that completes on its own is untouched.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <time.h>

typedef void *(*DisconnectFn)(void *ep);
typedef int (*IsCompletedFn)(void *request);

enum { kMaxTracked = 4096 };
static void *tracked_[kMaxTracked];
static int n_tracked_;
static double first_close_s_ = -1.0;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double grace_s(void) {
  const char *text = getenv("KOLO_CLUSTER_CLOSE_GRACE_MS");
  double ms = text != NULL ? atof(text) : 2000.0;
  return (ms > 0.0 ? ms : 2000.0) / 1000.0;
}

static int is_tracked(void *request) {
  for (int i = 0; i < n_tracked_; ++i) {
    if (tracked_[i] == request) return 1;
  }
  return 0;
}

void *ucp_disconnect_nb(void *ep) {
  static DisconnectFn real;
  if (real == NULL) real = (DisconnectFn)dlsym(RTLD_NEXT, "ucp_disconnect_nb");
  void *request = real(ep);
  if (first_close_s_ < 0.0) first_close_s_ = now_s();
  /* UCS_OK is NULL, errors are small negative values cast to pointers. */
  if (request == NULL || (unsigned long)request >= (unsigned long)-4096L) return request;
  if (n_tracked_ < kMaxTracked) tracked_[n_tracked_++] = request;
  return request;
}

int ucp_request_is_completed(void *request) {
  static IsCompletedFn real;
  if (real == NULL) real = (IsCompletedFn)dlsym(RTLD_NEXT, "ucp_request_is_completed");
  if (real(request)) return 1;
  return is_tracked(request) && now_s() - first_close_s_ > grace_s();
}
