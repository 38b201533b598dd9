// The flight recorder's cost per operation on the coordinator thread: one
// submitted(), two advance() and one finish(), given one clock read, as a
// recorded allreduce pays them, for resnet50's gradient names (torchvision's,
// 20-40 bytes) at the default capacity. Compare with an 8-byte allreduce's
// latency (kolo-allreduce-perf -b 8 -e 8) to judge whether it can stay on.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "bench/profile.h"
#include "core/flight_recorder.h"

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
  for (const auto& t : p.tensors) {
    core::Request r;
    r.name = t.name;
    r.params.count = t.elements;
    requests.push_back(std::move(r));
  }
  return requests;
}

void record_operation(benchmark::State& state) {
  const std::vector<core::Request> requests = resnet50_requests();
  core::FlightRecorder flight(static_cast<size_t>(state.range(0)));
  using State = core::FlightRecorder::State;
  size_t i = 0;
  for (auto _ : state) {
    const core::Request& r = requests[i++ % requests.size()];
    const auto now = core::FlightRecorder::Clock::now();
    const uint64_t seq = flight.submitted(r, now);
    flight.advance(seq, State::kNegotiated, now);
    flight.advance(seq, State::kExecuting, now);
    flight.finish(seq, Code::kOk, now);
    benchmark::DoNotOptimize(seq);
  }
  state.SetItemsProcessed(state.iterations());
}
// 0: the recorder off (what a call costs when KOLO_FLIGHT_RECORDER=0, clock read included).
BENCHMARK(record_operation)->Arg(0)->Arg(1024)->Arg(65536);

void dump_text(benchmark::State& state) {
  const std::vector<core::Request> requests = resnet50_requests();
  core::FlightRecorder flight(1024);
  for (size_t i = 0; i < 1024; ++i) {
    const uint64_t seq =
        flight.submitted(requests[i % requests.size()], core::FlightRecorder::Clock::now());
    flight.finish(seq, Code::kOk, core::FlightRecorder::Clock::now());
  }
  for (auto _ : state) {
    std::string text = flight.to_json_lines({}, core::FlightRecorder::Clock::now());
    benchmark::DoNotOptimize(text.data());
  }
}
BENCHMARK(dump_text)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace kolo::bench

BENCHMARK_MAIN();
