// The loopback transport's collectives other than allreduce: allgather, broadcast,
// alltoall and reducescatter, for ranks that are threads of one process (the
// layouts are those of transport::CollectiveView).
//
// Each call is two rendezvous on one Rendezvous (the hub's transport one):
//   1. every rank publishes its input pointer, dtype, counts, root and op; every
//      rank then checks that the published calls agree (the same verdict on every
//      rank, since all see the same blobs) and copies — or, for reducescatter,
//      reduces in rank order with kolo::reduce — what it needs straight from its
//      peers' inputs into its own output;
//   2. an empty rendezvous, so that nobody returns, and lets its input go, while
//      a peer may still read it.
// If a rank's output overlaps an input that is read (in place), its result waits
// in `scratch` and is copied out after step 2.
//
// Called by one rank's coordinator thread, in the same order on every rank.
#pragma once

#include <vector>

#include "common/status.h"
#include "transport/transport.h"
#include "transports/loopback/loopback_hub.h"

namespace kolo::loopback {

// supports_collective: CPU memory; a valid dtype; reducescatter with SUM, MIN, MAX
// or PRODUCT (the coordinator turns AVERAGE into SUM).
Status check_collective(Collective op, const transport::CollectiveView& view);

// Runs the collective for `rank` of `size`. Calls that disagree across ranks (counts,
// dtype, root, op) fail on every rank with KOLO_ERR_MISMATCH. `scratch` is the
// rank's grow-only buffer for in-place results.
Status run_collective(Rendezvous& rendezvous, int rank, int size, Collective op,
                      const transport::CollectiveView& view, std::vector<char>* scratch);

}  // namespace kolo::loopback
