// The size sweep of kolo-allreduce-perf (nccl-tests' all_reduce_perf, all_gather_perf,
// broadcast_perf, alltoall_perf and reduce_scatter_perf, through kolo).
#pragma once

#include <mpi.h>

#include "bench/perf_options.h"

namespace kolo::bench {

// Runs options.collective through kolo (already initialised) over sizes min_bytes,
// min_bytes*f, ... <= max_bytes, optionally interleaved with the matching MPI call,
// and prints one row per size on rank 0. Returns the process exit code: 0, or 1 if any element was wrong.
int run_sweep(MPI_Comm comm, const PerfOptions& options);

}  // namespace kolo::bench
