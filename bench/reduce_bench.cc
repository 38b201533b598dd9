// Reduction kernels (kolo::reduce::reduce) per dtype, op sum, at sizes from
// L1-resident to memory-bound. Bytes processed count the memory traffic of one call,
// two operands read and one written (3 x count x dtype size), so GB/s compares with
// the machine's memory bandwidth. The kernels also do min/max/prod; one benchmark
// (float32) shows those cost the same as sum.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "common/dtype.h"
#include "reduce/reduce.h"

namespace kolo::bench {
namespace {

void run_reduce(benchmark::State& state, DataType dtype, ReduceOp op) {
  const int64_t count = state.range(0);
  const size_t bytes = static_cast<size_t>(count) * dtype_size(dtype);
  // Small integers in every dtype (0x3c00 is 1.0 in float16, 0x3f80 in bfloat16;
  // for the others 1 byte of 0x01 per byte is a valid small value).
  std::vector<unsigned char> a(bytes, 0x01), b(bytes, 0x01), dst(bytes, 0);
  if (dtype == DataType::kFloat16 || dtype == DataType::kBfloat16) {
    const uint16_t one = dtype == DataType::kFloat16 ? 0x3c00 : 0x3f80;
    for (size_t i = 0; i + 1 < bytes; i += 2) {
      a[i] = b[i] = one & 0xff;
      a[i + 1] = b[i + 1] = one >> 8;
    }
  }
  for (auto _ : state) {
    reduce::reduce(dst.data(), a.data(), b.data(), count, dtype, op);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * 3 *
                          static_cast<int64_t>(bytes));
  state.SetLabel(dtype_name(dtype) + " " + op_name(op));
}

void register_all() {
  for (int t = 0; t < kNumDataTypes; ++t) {
    const DataType dtype = static_cast<DataType>(t);
    benchmark::RegisterBenchmark(
        ("reduce_sum/" + dtype_name(dtype)).c_str(),
        [dtype](benchmark::State& s) { run_reduce(s, dtype, ReduceOp::kSum); })
        ->RangeMultiplier(32)
        ->Range(1 << 10, 1 << 25)
        ->Unit(benchmark::kMicrosecond);
  }
  for (ReduceOp op : {ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct}) {
    benchmark::RegisterBenchmark(
        ("reduce_" + op_name(op) + "/float32").c_str(),
        [op](benchmark::State& s) { run_reduce(s, DataType::kFloat32, op); })
        ->Arg(1 << 15)
        ->Arg(1 << 22)
        ->Unit(benchmark::kMicrosecond);
  }
}

}  // namespace
}  // namespace kolo::bench

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  kolo::bench::register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
