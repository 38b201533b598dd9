// The gradient-set mode of kolo-allreduce-perf (-m PROFILE): one training step's
// gradients, allreduced four ways.
#pragma once

#include <mpi.h>

#include "bench/perf_cuda.h"
#include "bench/perf_options.h"

namespace kolo::bench {

// Runs the variants below for options.model, each for warmup_iters + iters steps,
// and prints one row per variant on rank 0. Manages kolo sessions itself (kolo must
// not be initialised on entry). Returns the exit code: 0, 1 if any element was
// wrong, 2 if the profile cannot be loaded. `device` is this rank's GPU for -t nccl
// (device arenas, NCCL references), null for host arenas.
int run_model(MPI_Comm comm, const PerfOptions& options, CudaDevice* device);

}  // namespace kolo::bench
