// The size sweep of kolo-allreduce-perf (nccl-tests' all_reduce_perf, all_gather_perf,
// broadcast_perf, alltoall_perf and reduce_scatter_perf, through kolo).
#pragma once

#include <mpi.h>

#include "bench/perf_cuda.h"
#include "bench/perf_options.h"

namespace kolo::bench {

// Runs options.collective through kolo (already initialised) over sizes min_bytes,
// min_bytes*f, ... <= max_bytes, optionally interleaved with the reference (-r), and
// prints one row per size on rank 0. `device` is this rank's GPU for -t nccl (device
// buffers, see perf_device_case.h), null for host buffers. Returns the process exit
// code: 0, or 1 if any element was wrong.
int run_sweep(MPI_Comm comm, const PerfOptions& options, CudaDevice* device);

}  // namespace kolo::bench
