// The kolo side of kolo-allreduce-perf: every operation goes through the public C
// API (kolo_allreduce_async, then kolo_wait), exactly as a user's program would.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>

#include "common/dtype.h"

namespace kolo::bench {

// kolo_init with KOLO_TRANSPORT set to `transport` first (unless empty) and, when
// `fusion_threshold` is non-empty, KOLO_FUSION_THRESHOLD too ("-" unsets it, so the
// default applies). MPI is already initialised by the benchmark, so kolo adopts it
// and kolo_shutdown leaves it running: sessions can be repeated with other knobs.
// Aborts the job with kolo's message on failure (every rank fails alike).
void start_kolo(MPI_Comm comm, const std::string& transport, const std::string& fusion_threshold);
void stop_kolo(MPI_Comm comm);

// The KOLO_TRANSPORT kolo will read: the environment's value, or "auto".
std::string effective_transport();

// One allreduce through the async API: submit, then wait. Aborts the job on any
// status other than KOLO_OK (a benchmark cannot go on after a failed collective).
void kolo_allreduce(MPI_Comm comm, const std::string& name, const void* in, void* out,
                    int64_t count, DataType dtype, ReduceOp op);

}  // namespace kolo::bench
