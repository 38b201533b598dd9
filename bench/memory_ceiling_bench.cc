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
// stores across distant cores] in transports/shm/allreduce.cc):
//
//   build/bin/memory_ceiling_bench --benchmark_filter=RoundTrip
#include <benchmark/benchmark.h>
#include <emmintrin.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "reduce/reduce.h"
#include "transports/shm/pass.h"

namespace {

constexpr int64_t kChunk = 16 << 10;  // elements per step: 64 KiB of each buffer, cached

std::vector<float> g_a, g_b;  // the two "ranks'" data; set up by thread 0

// Each iteration, runs step(i, n) over this thread's half of `count` elements,
// kChunk at a time; then reports the whole allreduce's rate. Google Benchmark
// adds up the threads' iterations (and reports Time per thread iteration, i.e.
// half an allreduce here) and the threads' counters: one thread's counter of
// size / threads per iteration is the whole allreduce's rate, in GB/s (1e9 B)
// as kolo-allreduce-perf reports.
// `evict` (may be empty): before each iteration, untimed, the thread writes its
// half of it, as another job's buffers pass through the caches between calls.
template <typename Step>
void run_halves(benchmark::State& state, int64_t count, const Step& step,
                std::vector<char>* evict = nullptr) {
  for (auto _ : state) {
    if (evict != nullptr && !evict->empty()) {
      state.PauseTiming();
      const size_t half = evict->size() / 2;
      std::memset(evict->data() + (state.thread_index() == 0 ? 0 : half), state.iterations() & 0xff,
                  half);
      state.ResumeTiming();
    }
    const int64_t half = count / 2;
    const int64_t begin = state.thread_index() == 0 ? 0 : half;
    const int64_t end = state.thread_index() == 0 ? half : count;
    for (int64_t i = begin; i < end; i += kChunk) step(i, std::min(kChunk, end - i));
  }
  if (state.thread_index() == 0)
    state.counters["busbw_GBps"] = benchmark::Counter(
        static_cast<double>(state.range(0)) / state.threads() / 1e9,
        benchmark::Counter::kIsIterationInvariantRate);
}

// Elements [i, i + n) of the in-place allreduce: a += b, then b = a.
void sum_in_place(int64_t i, int64_t n) {
  float* a = g_a.data() + i;
  float* b = g_b.data() + i;
  kolo::reduce::reduce(a, a, b, n, kolo::DataType::kFloat32, kolo::ReduceOp::kSum);
  std::memcpy(b, a, static_cast<size_t>(n) * sizeof(float));
}

void BM_TwoThreadAllreduce(benchmark::State& state) {
  const int64_t count = state.range(0) / static_cast<int64_t>(sizeof(float));
  if (state.thread_index() == 0) {  // the timed loop starts only when every thread reaches it
    g_a.assign(static_cast<size_t>(count), 1.0f);
    g_b.assign(static_cast<size_t>(count), 0.0f);
  }
  run_halves(state, count, sum_in_place);
}
BENCHMARK(BM_TwoThreadAllreduce)
    ->Arg(1 << 20)
    ->Arg(16 << 20)
    ->Arg(64 << 20)
    ->Threads(2)
    ->UseRealTime();

// The same with the caches cold as kolo-allreduce-perf -r mpi leaves them: between
// two of kolo's calls MPI's allreduce of the same size runs on its own input and
// output at each of the two ranks, 4 times the size in all, which this writes
// (untimed) before each iteration. The last-level cache of the development VM
// (480 MiB) holds the warm loop's buffers; this is the ceiling for the -r mpi
// rows, BM_TwoThreadAllreduce for a loop alone (-r none).
std::vector<char> g_evict;

void BM_TwoThreadAllreduceCold(benchmark::State& state) {
  const int64_t count = state.range(0) / static_cast<int64_t>(sizeof(float));
  if (state.thread_index() == 0) {
    g_a.assign(static_cast<size_t>(count), 1.0f);
    g_b.assign(static_cast<size_t>(count), 0.0f);
    g_evict.assign(4 * static_cast<size_t>(state.range(0)), 0);
  }
  run_halves(state, count, sum_in_place, &g_evict);
}
BENCHMARK(BM_TwoThreadAllreduceCold)->Arg(64 << 20)->Threads(2)->UseRealTime();

// The same allreduce out of place, as kolo-allreduce-perf runs it by default:
// each "rank" has an input and an output (four buffers), and each thread sums its
// half of the two inputs into a piece that stays in L1, then writes the piece to
// both outputs, with plain stores (Arg 0) or streaming ones (Arg 1). Every byte
// of input is read once and every byte of output written once, but an output
// line is not in cache when it is written: a plain store reads it first, and a
// streaming store sends it to memory past the cache. What this pattern costs on
// a machine, against BM_TwoThreadAllreduce, is what an out-of-place allreduce
// cannot win back by moving less (docs/perf/kolo-memory.md).
std::vector<float> g_out_a, g_out_b;

void BM_TwoThreadAllreduceOutOfPlace(benchmark::State& state) {
  const int64_t count = state.range(0) / static_cast<int64_t>(sizeof(float));
  const bool stream = state.range(1) != 0;
  if (state.thread_index() == 0) {
    g_a.assign(static_cast<size_t>(count), 1.0f);
    g_b.assign(static_cast<size_t>(count), 0.0f);
    g_out_a.assign(static_cast<size_t>(count), 0.0f);
    g_out_b.assign(static_cast<size_t>(count), 0.0f);
  }
  std::vector<float> piece(static_cast<size_t>(kChunk));
  run_halves(state, count, [&](int64_t i, int64_t n) {
    const size_t bytes = static_cast<size_t>(n) * sizeof(float);
    kolo::reduce::reduce(piece.data(), g_a.data() + i, g_b.data() + i, n,
                         kolo::DataType::kFloat32, kolo::ReduceOp::kSum);
    const char* from = reinterpret_cast<const char*>(piece.data());
    kolo::shm::copy(reinterpret_cast<char*>(g_out_a.data() + i), from, bytes, stream);
    kolo::shm::copy(reinterpret_cast<char*>(g_out_b.data() + i), from, bytes, stream);
    if (stream) _mm_sfence();  // the piece is reused: its streamed lines are out first
  });
}
BENCHMARK(BM_TwoThreadAllreduceOutOfPlace)
    ->Args({64 << 20, 0})
    ->Args({64 << 20, 1})
    ->Threads(2)
    ->UseRealTime();

// The other collectives' ceilings (issue #15): two threads stand for two ranks,
// each with its own input and output (distinct buffers, as kolo-allreduce-perf
// gives them), and each does only the copies its rank's output needs, straight
// from either "rank's" input, in kChunk pieces, the two threads in parallel:
//
//   allgather      out_t = in_0 ++ in_1             (reads S, writes S per thread)
//   alltoall       out_t = in_0[t] ++ in_1[t]       (the same traffic; in_r is S)
//   broadcast      thread 1: out_1 = out_0          (S; the root, thread 0, idles)
//   reducescatter  out_t = in_0[t] + in_1[t]        (reads S, writes S/2)
//
// S is the perf tool's size (the output for allgather and alltoall, the input for
// reducescatter, the buffer for broadcast). No real collective between processes
// moves less, so its time bounds kolo's and MPI's. Arg 1 picks plain (0) or
// streaming (1) stores for the output (Note [Streaming the output] in
// transports/shm/collectives.cc).
//
//   build/bin/memory_ceiling_bench --benchmark_filter=Ceiling
enum class Kind { kAllgather, kAlltoall, kBroadcast, kReducescatter };

std::vector<char> g_in[2], g_out[2];  // the two "ranks'" buffers; set up by thread 0

void put(char* dst, const char* src, size_t bytes, bool stream) {
  for (size_t at = 0; at < bytes; at += kChunk * sizeof(float)) {
    const size_t m = std::min(kChunk * sizeof(float), bytes - at);
    kolo::shm::copy(dst + at, src + at, m, stream);
  }
}

void BM_Ceiling(benchmark::State& state, Kind kind) {
  const size_t size = static_cast<size_t>(state.range(0));
  const bool stream = state.range(1) != 0;
  const int t = state.thread_index();
  if (t == 0) {
    const size_t in = kind == Kind::kBroadcast ? 0 : kind == Kind::kAllgather ? size / 2 : size;
    const size_t out = kind == Kind::kReducescatter ? size / 2 : size;
    for (int r = 0; r < 2; ++r) {
      g_in[r].assign(in, 1);
      g_out[r].assign(out, 2);
    }
  }
  std::vector<float> piece(static_cast<size_t>(kChunk));
  for (auto _ : state) {
    const size_t half = size / 2;
    char* out = g_out[t].data();
    switch (kind) {
      case Kind::kAllgather:
        for (int r = 0; r < 2; ++r) put(out + r * half, g_in[r].data(), half, stream);
        break;
      case Kind::kAlltoall:  // rank r's block for t is the t-th half of its input
        for (int r = 0; r < 2; ++r) put(out + r * half, g_in[r].data() + t * half, half, stream);
        break;
      case Kind::kBroadcast:
        if (t == 1) put(out, g_out[0].data(), size, stream);
        break;
      case Kind::kReducescatter:
        for (size_t at = 0; at < half; at += kChunk * sizeof(float)) {
          const int64_t n = static_cast<int64_t>(std::min(kChunk * sizeof(float), half - at) / 4);
          kolo::reduce::reduce(piece.data(), g_in[0].data() + t * half + at,
                               g_in[1].data() + t * half + at, n, kolo::DataType::kFloat32,
                               kolo::ReduceOp::kSum);
          kolo::shm::copy(out + at, reinterpret_cast<const char*>(piece.data()),
                               static_cast<size_t>(n) * 4, stream);
        }
        break;
    }
  }
  // As BM_TwoThreadAllreduce: Time is half a call (the threads' iterations are
  // added up); algbw = size / (call time), in GB/s as the perf tool's algbw.
  if (t == 0) {
    state.counters["algbw_GBps"] = benchmark::Counter(
        static_cast<double>(size) / state.threads() / 1e9,
        benchmark::Counter::kIsIterationInvariantRate);
  }
}

void register_ceilings() {
  const std::pair<const char*, Kind> kinds[] = {{"allgather", Kind::kAllgather},
                                                {"alltoall", Kind::kAlltoall},
                                                {"broadcast", Kind::kBroadcast},
                                                {"reducescatter", Kind::kReducescatter}};
  for (const auto& [name, kind] : kinds) {
    benchmark::RegisterBenchmark((std::string("BM_Ceiling/") + name).c_str(), BM_Ceiling, kind)
        ->ArgsProduct({{1 << 20, 16 << 20, 64 << 20, 256 << 20}, {0, 1}})
        ->Threads(2)
        ->UseRealTime();
  }
}
const bool g_registered = (register_ceilings(), true);

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
