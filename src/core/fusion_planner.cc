#include "core/fusion_planner.h"

namespace kolo::core {

std::vector<PlannedBucket> plan_buckets(const std::vector<PlanItem>& items, size_t threshold) {
  std::vector<PlannedBucket> buckets;
  std::vector<bool> taken(items.size(), false);
  for (size_t i = 0; i < items.size(); ++i) {
    if (taken[i]) continue;
    taken[i] = true;
    PlannedBucket bucket;
    bucket.items.push_back(i);
    bucket.bytes = items[i].bytes;
    if (threshold > 0 && items[i].bytes <= threshold) {
      for (size_t j = i + 1; j < items.size() && bucket.bytes < threshold; ++j) {
        if (taken[j] || items[j].fusion_class != items[i].fusion_class) continue;
        // Compared as a difference: bucket.bytes < threshold here, and the sum could
        // wrap for sizes near SIZE_MAX (found by tests/fuzz/fusion_planner_fuzz.cc).
        if (items[j].bytes > threshold - bucket.bytes) continue;  // look further ahead
        taken[j] = true;
        bucket.items.push_back(j);
        bucket.bytes += items[j].bytes;
      }
    }
    buckets.push_back(std::move(bucket));
  }
  return buckets;
}

}  // namespace kolo::core
