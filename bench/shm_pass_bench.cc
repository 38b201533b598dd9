// The shm allreduce's reduction of a rank's own shard (transports/shm/pass.h,
// Note [One pass over the own shard]), alone on one core: one pass in L1-sized
// pieces into the slot and the output (shm::reduce_shard, what the engine runs)
// against the two passes it replaced (reduce the whole shard into the slot, apply
// the output factor there, copy the slot to the output).
//
//   build/bin/shm_pass_bench --benchmark_counters_tabular=true
//
// Arguments: the shard's bytes (256 KiB is a 512 KiB slice's at 2 ranks), the
// number of peers (1: 2 ranks, 3: 4 ranks), whether an output factor is applied,
// and the bytes of the bucket the input and output walk through (a shard's worth
// per iteration, as the engine walks a large bucket slice by slice: 64 MiB comes
// from memory, 256 KiB stays in cache). The slot and the peers' copies stay
// where they are, as the engine's slots do. shard_GBps is bytes of shard reduced
// per second (1e9 B); the engine does this once per slice on every rank.
#include <benchmark/benchmark.h>

#include <cstring>
#include <functional>
#include <vector>

#include "common/status.h"
#include "reduce/reduce.h"
#include "transports/shm/pass.h"

namespace {

using kolo::DataType;
using kolo::ReduceOp;
namespace shm = kolo::shm;

struct Buffers {
  Buffers(size_t shard, int npeers, size_t bucket)
      : input(bucket, 1.0f), output(bucket, 0.0f), slot(shard, 0.0f), piece(shm::kPieceBytes) {
    for (int p = 0; p < npeers; ++p) peer_data.emplace_back(shard, 2.0f);
    for (const auto& p : peer_data) peers.push_back(reinterpret_cast<const char*>(p.data()));
  }
  // The input and output of the next shard of the bucket, in turn.
  size_t next(size_t shard_elems) {
    const size_t at = offset;
    offset = offset + 2 * shard_elems <= input.size() ? offset + shard_elems : 0;
    return at;
  }
  std::vector<float> input, output, slot;
  std::vector<std::vector<float>> peer_data;
  std::vector<const char*> peers;
  std::vector<char> piece;
  size_t offset = 0;
};

kolo::Status halve(void* data, int64_t count) {
  kolo::reduce::scale(data, data, count, DataType::kFloat32, 0.5);
  return kolo::Status::OK();
}

void set_counters(benchmark::State& state, size_t shard_bytes) {
  state.counters["shard_GBps"] = benchmark::Counter(
      static_cast<double>(shard_bytes) * static_cast<double>(state.iterations()) / 1e9,
      benchmark::Counter::kIsRate);
}

// What the engine did before: the whole shard reduced into the slot (each further
// peer read and written once more), the factor applied to the slot, then copied out.
void BM_OwnShardTwoPass(benchmark::State& state) {
  const size_t shard = static_cast<size_t>(state.range(0)) / sizeof(float);
  const int npeers = static_cast<int>(state.range(1));
  const bool factor = state.range(2) != 0;
  Buffers b(shard, npeers, static_cast<size_t>(state.range(3)) / sizeof(float));
  for (auto _ : state) {
    const size_t at = b.next(shard);
    float* slot = b.slot.data();
    const auto count = static_cast<int64_t>(shard);
    kolo::reduce::reduce(slot, b.input.data() + at, b.peers[0], count, DataType::kFloat32, ReduceOp::kSum);
    for (int p = 1; p < npeers; ++p)
      kolo::reduce::reduce(slot, slot, b.peers[p], count, DataType::kFloat32, ReduceOp::kSum);
    if (factor) benchmark::DoNotOptimize(halve(slot, count));
    std::memcpy(b.output.data() + at, slot, shard * sizeof(float));
    benchmark::ClobberMemory();
  }
  set_counters(state, shard * sizeof(float));
}

// The engine's one pass (shm::reduce_shard, plain stores).
void BM_OwnShardOnePass(benchmark::State& state) {
  const size_t shard = static_cast<size_t>(state.range(0)) / sizeof(float);
  const int npeers = static_cast<int>(state.range(1));
  const std::function<kolo::Status(void*, int64_t)> stage = halve;
  shm::ShardPass pass;
  pass.stage = state.range(2) != 0 ? &stage : nullptr;
  Buffers b(shard, npeers, static_cast<size_t>(state.range(3)) / sizeof(float));
  for (auto _ : state) {
    const size_t at = b.next(shard);
    benchmark::DoNotOptimize(shm::reduce_shard(
        pass, reinterpret_cast<const char*>(b.input.data() + at), b.peers.data(), npeers, 0,
        reinterpret_cast<char*>(b.slot.data()), reinterpret_cast<char*>(b.output.data() + at),
        static_cast<int64_t>(shard), b.piece.data()));
    benchmark::ClobberMemory();
  }
  set_counters(state, shard * sizeof(float));
}

void shard_args(benchmark::internal::Benchmark* b) {
  for (int64_t bucket : {int64_t{256} << 10, int64_t{64} << 20}) {
    for (int64_t npeers : {1, 3}) {
      for (int64_t factor : {0, 1}) b->Args({int64_t{256} << 10, npeers, factor, bucket});
    }
  }
  b->ArgNames({"shard", "peers", "factor", "bucket"});
}

BENCHMARK(BM_OwnShardTwoPass)->Apply(shard_args);
BENCHMARK(BM_OwnShardOnePass)->Apply(shard_args);

}  // namespace

BENCHMARK_MAIN();
