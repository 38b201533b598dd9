#include "core/fusion_planner.h"

namespace kolo::core {

std::vector<PlannedBucket> plan_buckets(const std::vector<PlanItem>& items, size_t threshold) {
  std::vector<PlannedBucket> buckets;
  PlanScratch scratch;
  plan_buckets(items, threshold, &scratch, &buckets);
  return buckets;
}

void plan_buckets(const std::vector<PlanItem>& items, size_t threshold, PlanScratch* scratch,
                  std::vector<PlannedBucket>* out) {
  std::vector<char>& taken = scratch->taken;
  taken.assign(items.size(), 0);
  size_t used = 0;  // buckets of *out filled so far; the others keep their storage
  for (size_t i = 0; i < items.size(); ++i) {
    if (taken[i]) continue;
    taken[i] = 1;
    if (used == out->size()) out->emplace_back();
    PlannedBucket& bucket = (*out)[used++];
    bucket.items.clear();
    bucket.items.push_back(i);
    bucket.bytes = items[i].bytes;
    if (threshold > 0 && items[i].bytes <= threshold) {
      for (size_t j = i + 1; j < items.size() && bucket.bytes < threshold; ++j) {
        if (taken[j] || items[j].fusion_class != items[i].fusion_class) continue;
        // Compared as a difference: bucket.bytes < threshold here, and the sum could
        // wrap for sizes near SIZE_MAX (found by tests/fuzz/fusion_planner_fuzz.cc).
        if (items[j].bytes > threshold - bucket.bytes) continue;  // look further ahead
        taken[j] = 1;
        bucket.items.push_back(j);
        bucket.bytes += items[j].bytes;
      }
    }
  }
  out->resize(used);
}

namespace {

// Packed into the fusion buffer beside others of its class: host allgathers and
// broadcasts (device ones have no staging buffer here), and plain allreduces
// anywhere (a device transport stages its own buckets).
bool fusable(const TensorParams& p) {
  switch (p.collective) {
    case Collective::kAllreduce: return true;
    case Collective::kAllgather:
    case Collective::kBroadcast: return p.device_kind == DeviceKind::kCpu;
    default: return false;
  }
}

}  // namespace

bool same_fusion_class(const TensorParams& a, const TensorParams& b) {
  if (a.collective != b.collective || a.dtype != b.dtype || a.device_kind != b.device_kind) return false;
  switch (a.collective) {
    case Collective::kAllreduce:
      return a.op == b.op && a.prescale == b.prescale && a.postscale == b.postscale;
    case Collective::kBroadcast: return a.root == b.root;
    case Collective::kAllgather: return true;
    default: return false;  // never fused
  }
}

size_t packed_bytes(const Response& r, int world_size) {
  const TensorParams& p = r.params;
  int64_t elements = 0;
  if (p.collective == Collective::kAllgather) {
    for (int64_t rows : r.rows_per_rank) elements += rows * p.row_count;
  } else if (p.collective == Collective::kGroupedAllgather && world_size > 0) {
    const size_t n = static_cast<size_t>(world_size);
    for (size_t k = 0; k < r.rows_per_rank.size() && k / n < p.member_row_counts.size(); ++k)
      elements += r.rows_per_rank[k] * p.member_row_counts[k / n];
  } else {
    return p.bytes();
  }
  return static_cast<size_t>(elements) * dtype_size(p.dtype);
}

std::vector<PlannedBucket> plan_cycle(const std::vector<const Response*>& responses,
                                      int world_size, size_t threshold, size_t alone_bytes) {
  std::vector<PlannedBucket> buckets;
  PlanScratch scratch;
  plan_cycle(responses, world_size, threshold, alone_bytes, &scratch, &buckets);
  return buckets;
}

void plan_cycle(const std::vector<const Response*>& responses, int world_size, size_t threshold,
                size_t alone_bytes, PlanScratch* scratch, std::vector<PlannedBucket>* out) {
  // Fusion classes in order of first appearance: a pure function of the list.
  std::vector<const TensorParams*>& classes = scratch->classes;
  std::vector<PlanItem>& items = scratch->items;
  classes.clear();
  items.clear();
  for (size_t i = 0; i < responses.size(); ++i) {
    const TensorParams& p = responses[i]->params;
    const size_t bytes = packed_bytes(*responses[i], world_size);
    // What must run alone gets a class of its own (negative, unlike any shared one).
    if (!fusable(p) || bytes >= alone_bytes) {
      items.push_back(PlanItem{bytes, -1 - static_cast<int>(i)});
      continue;
    }
    int cls = -1;
    for (size_t c = 0; c < classes.size() && cls < 0; ++c)
      if (same_fusion_class(*classes[c], p)) cls = static_cast<int>(c);
    if (cls < 0) {
      cls = static_cast<int>(classes.size());
      classes.push_back(&p);
    }
    items.push_back(PlanItem{bytes, cls});
  }
  plan_buckets(items, threshold, scratch, out);
}

}  // namespace kolo::core
