// The ceiling a 2-rank allreduce on one machine is measured against: two threads
// of one process stand for the two ranks, each owning half of the two ranks'
// buffers a and b. Each sums its half and writes the result into both, in chunks
// that stay in cache: every byte is read once and written once, with no copy
// through shared memory and no synchronisation but the iteration's. No real
// allreduce between processes can do less work, so its busbw (= size / time at 2
// ranks) bounds what kolo-allreduce-perf can show on the same machine.
//
//   build/bin/memory_ceiling_bench --benchmark_counters_tabular=true
//
// BM_CoreRoundTrip measures how far apart the first two cores this process may run
// on are: two threads pinned to them pass a counter back and forth through one
// cache line; the time per round trip is two cache-line transfers. On the 2-core
// development VM it reads 75-135 ns or 355-430 ns depending on where the host has
// put the vCPUs, which decides how fast the shm path can be (Note [Streaming
// stores across distant cores] in transports/mpi/shm_transport.cc):
//
//   build/bin/memory_ceiling_bench --benchmark_filter=RoundTrip
#include <benchmark/benchmark.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>
#include <thread>
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

// The first two CPUs of this process's affinity mask, or -1.
std::pair<int, int> two_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return {-1, -1};
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE && cpus.size() < 2; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus.size() == 2 ? std::make_pair(cpus[0], cpus[1]) : std::make_pair(-1, -1);
}

bool pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof(set), &set) == 0;
}

void BM_CoreRoundTrip(benchmark::State& state) {
  // Read once, before this thread is pinned (the benchmark runs several times).
  static const std::pair<int, int> cpus = two_cpus();
  const auto [first, second] = cpus;
  if (first < 0 || !pin(first)) {
    state.SkipWithError("needs two CPUs to pin to");
    return;
  }
  alignas(64) static std::atomic<int64_t> ball;
  ball.store(0);
  std::atomic<bool> stop{false};
  // The partner answers every odd value with the next even one.
  std::thread partner([&, second = second] {
    pin(second);
    int64_t seen = 0;
    while (!stop.load(std::memory_order_relaxed)) {
      const int64_t v = ball.load(std::memory_order_acquire);
      if (v != seen && (v & 1)) {
        ball.store(v + 1, std::memory_order_release);
        seen = v + 1;
      }
    }
  });
  int64_t v = 0;
  for (auto _ : state) {
    ball.store(++v, std::memory_order_release);
    while (ball.load(std::memory_order_acquire) != v + 1) {
    }
    ++v;
  }
  stop.store(true);
  partner.join();
  state.SetLabel("cpu " + std::to_string(first) + " <-> cpu " + std::to_string(second));
}
BENCHMARK(BM_CoreRoundTrip)->MinTime(0.2);

}  // namespace

BENCHMARK_MAIN();
