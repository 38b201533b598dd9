// Fuzz target: the fusion planner (src/core/fusion_planner.h), against the
// invariants its header states.
// - The buckets partition the items: each index in exactly one bucket; indices
//   increase within a bucket; buckets are ordered by their first item.
// - A bucket holds one fusion class, and its bytes are the sum of its items'.
// - A bucket of two or more items holds at most `threshold` bytes; an item over
//   the threshold, and every item when the threshold is 0, is alone.
// - Look-ahead is greedy: an item of the bucket's class after its first item but
//   placed in a later bucket did not fit when it was reached (or the bucket was
//   already full).
// - The same input gives the same plan.
#include <vector>

#include "core/fusion_planner.h"
#include "tests/fuzz/fuzz_input.h"

namespace kolo::core {
namespace {

using fuzz::FuzzInput;

bool same(const std::vector<PlannedBucket>& a, const std::vector<PlannedBucket>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].items != b[i].items || a[i].bytes != b[i].bytes) return false;
  return true;
}

// Sizes: mostly small (so buckets fill), sometimes anything a size_t can hold.
size_t make_bytes(FuzzInput* in) {
  const uint8_t kind = in->take<uint8_t>();
  if (kind < 200) return static_cast<size_t>(in->take<uint16_t>());
  if (kind < 250) return static_cast<size_t>(in->take<uint32_t>());
  return in->take<size_t>();
}

void check_plan(const std::vector<PlanItem>& items, size_t threshold) {
  const std::vector<PlannedBucket> plan = plan_buckets(items, threshold);
  KOLO_FUZZ_CHECK(same(plan, plan_buckets(items, threshold)), "not deterministic");
  std::vector<int> bucket_of(items.size(), -1);
  size_t previous_first = 0;
  for (size_t b = 0; b < plan.size(); ++b) {
    const PlannedBucket& bucket = plan[b];
    KOLO_FUZZ_CHECK(!bucket.items.empty(), "bucket %zu is empty", b);
    KOLO_FUZZ_CHECK(b == 0 || bucket.items[0] > previous_first, "bucket %zu out of order", b);
    previous_first = bucket.items[0];
    unsigned __int128 sum = 0;
    for (size_t k = 0; k < bucket.items.size(); ++k) {
      const size_t i = bucket.items[k];
      KOLO_FUZZ_CHECK(i < items.size(), "index %zu out of range", i);
      KOLO_FUZZ_CHECK(bucket_of[i] == -1, "item %zu in two buckets", i);
      bucket_of[i] = static_cast<int>(b);
      KOLO_FUZZ_CHECK(k == 0 || i > bucket.items[k - 1], "bucket %zu not increasing", b);
      KOLO_FUZZ_CHECK(items[i].fusion_class == items[bucket.items[0]].fusion_class,
                      "bucket %zu mixes classes", b);
      sum += items[i].bytes;
    }
    KOLO_FUZZ_CHECK(sum == bucket.bytes, "bucket %zu bytes are not its items' sum", b);
    if (bucket.items.size() > 1) {
      KOLO_FUZZ_CHECK(threshold > 0 && sum <= threshold, "bucket %zu of %zu items over %zu", b,
                      bucket.items.size(), threshold);
    }
  }
  for (size_t i = 0; i < items.size(); ++i)
    KOLO_FUZZ_CHECK(bucket_of[i] != -1, "item %zu in no bucket", i);

  // Greedy look-ahead: a later item of the class that went elsewhere did not fit.
  for (const PlannedBucket& bucket : plan) {
    const size_t first = bucket.items[0];
    if (threshold == 0 || items[first].bytes > threshold) continue;
    unsigned __int128 before = 0;  // the bucket's bytes when item j was reached
    size_t k = 0;
    for (size_t j = first; j < items.size(); ++j) {
      if (k < bucket.items.size() && bucket.items[k] == j) {
        before += items[j].bytes;
        ++k;
        continue;
      }
      if (items[j].fusion_class != items[first].fusion_class) continue;
      if (bucket_of[j] < bucket_of[first]) continue;  // taken by an earlier bucket
      KOLO_FUZZ_CHECK(before >= threshold || before + items[j].bytes > threshold,
                      "item %zu fit into the bucket of item %zu but was left out", j, first);
    }
  }
}

}  // namespace
}  // namespace kolo::core

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kolo::fuzz::FuzzInput in(data, size);
  const uint8_t threshold_kind = in.take<uint8_t>();
  size_t threshold;
  if (threshold_kind < 16) {
    threshold = 0;
  } else if (threshold_kind < 240) {
    threshold = in.take<uint16_t>();
  } else {
    threshold = in.take<size_t>();
  }
  const int classes = 1 + in.take<uint8_t>() % 4;
  std::vector<kolo::core::PlanItem> items(in.take<uint8_t>() % 96);
  for (auto& item : items) {
    item.bytes = kolo::core::make_bytes(&in);
    item.fusion_class = in.take<uint8_t>() % classes;
  }
  kolo::core::check_plan(items, threshold);
  return 0;
}
