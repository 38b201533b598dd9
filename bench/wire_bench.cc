// Wire encoding of the negotiation messages (kolo::core::encode_requests /
// decode_requests) for one step of resnet50: 161 requests named as torchvision names
// the parameters. This is the slow path's per-rank cost when the response cache
// misses (the first step, or any step after the set of tensors changes).
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "bench/profile.h"
#include "core/wire.h"

namespace kolo::bench {
namespace {

std::vector<core::Request> resnet50_requests() {
  Profile p;
  std::string error;
  if (!load_profile("resnet50", &p, &error)) {
    std::fprintf(stderr, "%s\n", error.c_str());
    std::exit(1);
  }
  std::vector<core::Request> requests;
  for (auto it = p.tensors.rbegin(); it != p.tensors.rend(); ++it) {
    core::Request r;
    r.name = it->name;
    r.params.dtype = DataType::kFloat32;
    r.params.op = ReduceOp::kAverage;
    r.params.count = it->elements;
    requests.push_back(std::move(r));
  }
  return requests;
}

void encode(benchmark::State& state) {
  const std::vector<core::Request> requests = resnet50_requests();
  size_t bytes = 0;
  for (auto _ : state) {
    std::string wire = core::encode_requests(requests);
    bytes = wire.size();
    benchmark::DoNotOptimize(wire.data());
  }
  state.counters["requests"] = static_cast<double>(requests.size());
  state.counters["wire_bytes"] = static_cast<double>(bytes);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
}

void decode(benchmark::State& state) {
  const std::string wire = core::encode_requests(resnet50_requests());
  std::vector<core::Request> decoded;
  for (auto _ : state) {
    decoded.clear();
    if (!core::decode_requests(wire, &decoded).ok()) {
      state.SkipWithError("decode_requests failed");
      break;
    }
    benchmark::DoNotOptimize(decoded.data());
  }
  state.counters["requests"] = static_cast<double>(decoded.size());
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * wire.size()));
}

BENCHMARK(encode)->Unit(benchmark::kMicrosecond);
BENCHMARK(decode)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace kolo::bench

BENCHMARK_MAIN();
