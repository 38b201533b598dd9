// --breakdown: where each timed kolo operation's time goes, phase by phase, from
// the times kolo stamps on its handle (kolo_handle_phases) and the tool's own clock
// around the submit call and kolo_wait. See Note [Where a small operation's time
// goes] in src/core/handle.h for what each phase covers.
//
// Main thread only, every rank: the kolo_* helpers (perf_kolo.h) record one row per
// operation while it is on; the sweep reports each size's rows and clears them.
#pragma once

#include <mpi.h>

#include <kolo/kolo.h>

namespace kolo::bench {

void breakdown_enable();
bool breakdown_enabled();
// The submit call is about to start (before kolo_*_async).
void breakdown_call_started();
// kolo_wait on `handle` has just returned KOLO_OK: records the operation's row.
void breakdown_record(kolo_handle_t handle);
// Collective over `comm`: rank 0 prints one line per rank with the per-phase
// medians (microseconds) over the last `iters` rows of that rank; every rank then
// forgets its rows.
void breakdown_report(MPI_Comm comm, int iters);

}  // namespace kolo::bench
