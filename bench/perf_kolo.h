// The kolo side of kolo-allreduce-perf: every operation goes through the public C
// API (kolo_allreduce_async, then kolo_wait), exactly as a user's program would.
#pragma once

#include <mpi.h>

#include <kolo/kolo.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/dtype.h"

namespace kolo::bench {

// kolo_init with KOLO_TRANSPORT set to `transport` first (unless empty) and, when
// `fusion_threshold` is non-empty, KOLO_FUSION_THRESHOLD too ("-" unsets it, so the
// default applies). MPI is already initialised by the benchmark, so kolo adopts it
// and kolo_shutdown leaves it running: sessions can be repeated with other knobs.
// Aborts the job with kolo's message on failure (every rank fails alike).
void start_kolo(MPI_Comm comm, const std::string& transport, const std::string& fusion_threshold);
void stop_kolo(MPI_Comm comm);

// --process-set: adds the set of `ranks` (collective over `comm`, every rank), and
// makes every later operation here run in it. Returns this rank's communicator of
// the set's members (in set-rank order), or MPI_COMM_NULL where it is not one.
// Aborts the job with kolo's message when the set is refused.
MPI_Comm use_process_set(MPI_Comm comm, const std::vector<int>& ranks);

// Whether kolo_allreduce() sets KOLO_OPTION_DETERMINISTIC from now on
// (--with-deterministic: the rank-order path timed beside the default).
void set_deterministic(bool on);
// Whether the calls below use kolo's blocking forms from now on (--blocking:
// kolo_allreduce_ex, kolo_allgather_ex, ...) instead of the async call and kolo_wait.
void set_blocking(bool on);

// The KOLO_TRANSPORT kolo will read: the environment's value, or "auto".
std::string effective_transport();

// One allreduce through the async API: submit, then wait. Aborts the job on any
// status other than KOLO_OK (a benchmark cannot go on after a failed collective).
// `device` says where in and out live (CPU memory unless given).
void kolo_allreduce(MPI_Comm comm, const std::string& name, const void* in, void* out,
                    int64_t count, DataType dtype, ReduceOp op,
                    const kolo_device_t& device = kolo_device_t{KOLO_DEVICE_CPU, 0, nullptr});

// A completed handle, released (with the output kolo allocated for it) when the last
// owner lets go. Lets the caller read a kolo-owned output after the timer stopped.
struct HandleRelease {
  void operator()(kolo_handle_t handle) const { kolo_handle_release(handle); }
};
using CompletedHandle = std::unique_ptr<kolo_handle, HandleRelease>;

// The handle-owned output of a completed allgather / alltoall and its size in bytes.
const char* handle_output(const CompletedHandle& handle, int64_t* bytes);

// The other collectives, each submit + wait, aborting the job on failure as
// kolo_allreduce does. count_per_rank is what each rank contributes (allgather),
// sends to each peer (alltoall) or receives (reducescatter); rows of one element.
// With `into` (--into) the allgather writes there (kolo_allgather_into_ex, or
// kolo_allgather_into_async_ex and kolo_wait; as MPI_Allgather does) and returns
// no handle; null: into the handle's output.
CompletedHandle kolo_allgather(MPI_Comm comm, const std::string& name, const void* in,
                               int64_t count_per_rank, DataType dtype, void* into);
CompletedHandle kolo_alltoall(MPI_Comm comm, const std::string& name, const void* in,
                              int64_t count_per_peer, int world_size, DataType dtype);
// In place: `buffer` holds the data on the root and receives it elsewhere. `root`
// is a rank of `comm` (of the process set's communicator with --process-set).
void kolo_broadcast(MPI_Comm comm, const std::string& name, void* buffer, int64_t count,
                    DataType dtype, int root);
void kolo_reducescatter(MPI_Comm comm, const std::string& name, const void* in, void* out,
                        int64_t count_per_rank, int world_size, DataType dtype, ReduceOp op);

}  // namespace kolo::bench
