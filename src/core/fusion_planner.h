// The fusion planner: cuts the negotiated, ordered list of ready tensors into
// buckets. Pure: no I/O, no state.
//
// Invariants (asserted by tests/unit/core/fusion_planner_test.cc):
// - Identical input gives identical output, so every rank cuts the same buckets
//   from the same negotiated list (DESIGN.md rule 2).
// - Every item is in exactly one bucket; a bucket holds items of one fusion class
//   only, in list order; buckets are ordered by their first item.
// - A bucket of two or more items holds at most `threshold` bytes. An item larger
//   than the threshold, and every item when threshold is 0, is a bucket alone.
// - Look-ahead: an item that does not fit into the open bucket does not close it;
//   later, smaller items of the same class still join it (Horovod's behaviour).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

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

}  // namespace kolo::core
