// The fusion planner: cuts the negotiated, ordered list of ready tensors into
// buckets. Pure: no I/O, no state.
//
// Two layers. plan_buckets() is the greedy cut over sizes and opaque classes;
// plan_cycle() decides, from the negotiated responses themselves, which
// responses may share a bucket (their fusion class), how many bytes each packs,
// and which must run alone, then cuts with plan_buckets(). The executor runs each
// bucket as one operation: an allreduce bucket reduces the concatenation; an
// allgather bucket gathers per rank the concatenation of the tensors' blocks; a
// broadcast bucket broadcasts the concatenation (Note [Fused allgather and
// broadcast] in executor_gather.h).
//
// Invariants (asserted by tests/unit/core/fusion_planner_test.cc):
// - Identical input gives identical output, so every rank cuts the same buckets
//   from the same negotiated list (docs/design.md, Rules, 2).
// - Every item is in exactly one bucket; a bucket holds items of one fusion class
//   only, in list order; buckets are ordered by their first item.
// - A bucket of two or more items holds at most `threshold` bytes. An item larger
//   than the threshold, and every item when threshold is 0, is a bucket alone.
// - Look-ahead: an item that does not fit into the open bucket does not close it;
//   later, smaller items of the same class still join it (Horovod's behaviour).
// plan_cycle() adds:
// - A fusion class is one kind (allreduce, allgather or broadcast), one dtype
//   and one device kind; allreduces also one op and the same factors, broadcasts
//   one root. Every other response (alltoall, reducescatter, barrier, join, any
//   group, a device allgather or broadcast) is a bucket alone, and so is a
//   response whose packed bytes reach `alone_bytes` (Note [Large tensors skip
//   the fusion buffer] in executor.cc).
// - A bucket's bytes are the sum of its responses' packed_bytes().
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/request.h"

namespace kolo::core {

struct PlanItem {
  size_t bytes = 0;
  // Items may share a bucket only if their classes are equal (same collective,
  // dtype, op, device, scale factors). Assigned by the caller.
  int fusion_class = 0;
};

struct PlannedBucket {
  std::vector<size_t> items;  // indices into the input, increasing
  size_t bytes = 0;
};

std::vector<PlannedBucket> plan_buckets(const std::vector<PlanItem>& items, size_t threshold);

// The planner's working storage, kept by a caller that plans every cycle so
// that a warm cycle allocates nothing (the executor's).
struct PlanScratch {
  std::vector<const TensorParams*> classes;
  std::vector<PlanItem> items;
  std::vector<char> taken;
};

// As above, into *out, reusing its buckets' storage and the scratch's.
void plan_buckets(const std::vector<PlanItem>& items, size_t threshold, PlanScratch* scratch,
                  std::vector<PlannedBucket>* out);

// The bytes a response occupies in the fusion buffer: an allgather's (or grouped
// allgather's) whole gathered output, every rank's rows; otherwise its own
// tensor's (or members') bytes.
size_t packed_bytes(const Response& response, int world_size);

// Whether two responses may share a bucket (see the invariants above).
bool same_fusion_class(const TensorParams& a, const TensorParams& b);

// The buckets of one cycle's OK responses (in negotiated order), by the rules
// above. `threshold` bounds a bucket's packed bytes.
std::vector<PlannedBucket> plan_cycle(const std::vector<const Response*>& responses,
                                      int world_size, size_t threshold, size_t alone_bytes);
// As above, into *out, reusing storage as plan_buckets() does.
void plan_cycle(const std::vector<const Response*>& responses, int world_size, size_t threshold,
                size_t alone_bytes, PlanScratch* scratch, std::vector<PlannedBucket>* out);

}  // namespace kolo::core
