// The fusion planner (kolo::core::plan_buckets) on resnet50's 161 gradients in
// backward order, at thresholds 0 (fusion off), 1 MiB, 16 MiB and 64 MiB (default).
// It runs once per coordinator cycle that has ready tensors, so its cost is part of
// every step's latency.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "bench/profile.h"
#include "core/fusion_planner.h"

namespace kolo::bench {
namespace {

std::vector<core::PlanItem> resnet50_items() {
  Profile p;
  std::string error;
  if (!load_profile("resnet50", &p, &error)) {
    std::fprintf(stderr, "%s\n", error.c_str());
    std::exit(1);
  }
  std::vector<core::PlanItem> items;
  for (auto it = p.tensors.rbegin(); it != p.tensors.rend(); ++it) {  // backward order
    items.push_back({static_cast<size_t>(it->elements) * 4, 0});
  }
  return items;
}

void plan(benchmark::State& state) {
  const std::vector<core::PlanItem> items = resnet50_items();
  const size_t threshold = static_cast<size_t>(state.range(0));
  size_t buckets = 0;
  for (auto _ : state) {
    std::vector<core::PlannedBucket> planned = core::plan_buckets(items, threshold);
    buckets = planned.size();
    benchmark::DoNotOptimize(planned.data());
  }
  state.counters["items"] = static_cast<double>(items.size());
  state.counters["buckets"] = static_cast<double>(buckets);
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(items.size()));
}

BENCHMARK(plan)->Arg(0)->Arg(1 << 20)->Arg(16 << 20)->Arg(64 << 20)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace kolo::bench

BENCHMARK_MAIN();
