// The ceiling a 2-rank allreduce on one machine is measured against: two threads
// of one process stand for the two ranks, each owning half of the two ranks'
// buffers a and b. Each sums its half and writes the result into both, in chunks
// that stay in cache: every byte is read once and written once, with no copy
// through shared memory and no synchronisation but the iteration's. No real
// allreduce between processes can do less work, so its busbw (= size / time at 2
// ranks) bounds what kolo-allreduce-perf can show on the same machine.
//
//   build/bin/memory_ceiling_bench --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "reduce/reduce.h"

namespace {

constexpr int64_t kChunk = 16 << 10;  // elements per step: 64 KiB of each buffer, cached

std::vector<float> g_a, g_b;  // the two "ranks'" data; set up by thread 0

void BM_TwoThreadAllreduce(benchmark::State& state) {
  const int64_t count = state.range(0) / static_cast<int64_t>(sizeof(float));
  if (state.thread_index() == 0) {  // the timed loop starts only when every thread reaches it
    g_a.assign(static_cast<size_t>(count), 1.0f);
    g_b.assign(static_cast<size_t>(count), 0.0f);
  }
  for (auto _ : state) {
    const int64_t half = count / 2;
    const int64_t begin = state.thread_index() == 0 ? 0 : half;
    const int64_t end = state.thread_index() == 0 ? half : count;
    for (int64_t i = begin; i < end; i += kChunk) {
      const int64_t n = std::min(kChunk, end - i);
      float* a = g_a.data() + i;
      float* b = g_b.data() + i;
      kolo::reduce::reduce(a, a, b, n, kolo::DataType::kFloat32, kolo::ReduceOp::kSum);
      std::memcpy(b, a, static_cast<size_t>(n) * sizeof(float));
    }
  }
  // Google Benchmark adds up the threads' iterations (and reports Time per thread
  // iteration, i.e. half an allreduce here) and the threads' counters: one
  // thread's counter of size / threads per iteration is the whole allreduce's
  // rate, in GB/s (1e9 B) as kolo-allreduce-perf reports.
  if (state.thread_index() == 0)
    state.counters["busbw_GBps"] = benchmark::Counter(
        static_cast<double>(state.range(0)) / state.threads() / 1e9,
        benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_TwoThreadAllreduce)
    ->Arg(1 << 20)
    ->Arg(16 << 20)
    ->Arg(64 << 20)
    ->Threads(2)
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
