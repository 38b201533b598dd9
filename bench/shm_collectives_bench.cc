// The shm collectives engine (transports/mpi/shm_collectives.h) against MPI's
// blocking collectives, engine to engine: no coordinator, no negotiation, the
// same pre-faulted buffers. Run under mpiexec on one node, e.g.
//
//   mpiexec.mpich -bind-to core -n 2 build/bin/shm_collectives_bench
//
// Every rank runs the same benchmarks with the same fixed iteration counts (a
// collective cannot let each rank choose its own); rank 0 reports. Bytes are
// those of the perf tool's rows: allgather and alltoall the output, reducescatter
// the input, broadcast the buffer. Inputs are not checked here
// (shm_collectives_test does that).
#include <benchmark/benchmark.h>
#include <mpi.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "transports/mpi/shm_collectives.h"

namespace kolo::mpi {
namespace {

using transport::CollectiveOp;
using transport::CollectiveView;

constexpr int64_t kMaxBytes = int64_t{64} << 20;

struct Setup {
  std::unique_ptr<ShmCollectives> engine;
  std::vector<char> in, out;
  int rank = 0, size = 1;
};

Setup& setup() {
  static Setup s;
  return s;
}

// The view of `bytes` of float32 (the perf tool's shapes, per rank).
CollectiveView view_for(CollectiveOp op, int64_t bytes) {
  Setup& s = setup();
  const int64_t per = std::max<int64_t>(1, bytes / 4 / s.size);
  CollectiveView v;
  v.input = s.in.data();
  v.output = s.out.data();
  v.dtype = DataType::kFloat32;
  switch (op) {
    case CollectiveOp::kBroadcast:
      v.count = bytes / 4;
      v.input = s.out.data();  // in place, as the executor hands host broadcasts over
      break;
    case CollectiveOp::kAlltoall:
      v.send_counts.assign(static_cast<size_t>(s.size), per);
      v.recv_counts = v.send_counts;
      break;
    default:
      v.recv_counts.assign(static_cast<size_t>(s.size), per);
      break;
  }
  return v;
}

void BM_Shm(benchmark::State& state, CollectiveOp op) {
  const CollectiveView v = view_for(op, state.range(0));
  for (auto _ : state) {
    Status st = setup().engine->run(op, v);
    if (!st.ok()) state.SkipWithError(st.to_string().c_str());
  }
  state.SetBytesProcessed(state.iterations() * state.range(0));
}

void BM_Mpi(benchmark::State& state, CollectiveOp op) {
  const CollectiveView v = view_for(op, state.range(0));
  const int per = static_cast<int>(v.recv_counts.empty() ? 0 : v.recv_counts[0]);
  std::vector<int> counts(static_cast<size_t>(setup().size), per);
  for (auto _ : state) {
    switch (op) {
      case CollectiveOp::kAllgather:
        MPI_Allgather(v.input, per, MPI_FLOAT, v.output, per, MPI_FLOAT, MPI_COMM_WORLD);
        break;
      case CollectiveOp::kBroadcast:
        MPI_Bcast(v.output, static_cast<int>(v.count), MPI_FLOAT, 0, MPI_COMM_WORLD);
        break;
      case CollectiveOp::kAlltoall:
        MPI_Alltoall(v.input, per, MPI_FLOAT, v.output, per, MPI_FLOAT, MPI_COMM_WORLD);
        break;
      case CollectiveOp::kReducescatter:
        MPI_Reduce_scatter(v.input, v.output, counts.data(), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        break;
    }
  }
  state.SetBytesProcessed(state.iterations() * state.range(0));
}

void register_all() {
  const std::pair<const char*, CollectiveOp> ops[] = {
      {"allgather", CollectiveOp::kAllgather},
      {"broadcast", CollectiveOp::kBroadcast},
      {"alltoall", CollectiveOp::kAlltoall},
      {"reducescatter", CollectiveOp::kReducescatter}};
  for (const auto& [name, op] : ops) {
    for (int64_t bytes = 4 << 10; bytes <= kMaxBytes; bytes *= 16) {
      // A fixed count, the same on every rank: about 64 MiB moved per benchmark.
      const int64_t iterations = std::max<int64_t>(5, std::min<int64_t>(2000, kMaxBytes / bytes));
      for (bool shm : {true, false}) {
        const std::string label = std::string(shm ? "BM_Shm/" : "BM_Mpi/") + name;
        benchmark::RegisterBenchmark(label.c_str(), shm ? BM_Shm : BM_Mpi, op)
            ->Arg(bytes)
            ->Iterations(iterations)
            ->UseRealTime()
            ->Unit(benchmark::kMicrosecond);
      }
    }
  }
}

class SilentReporter : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>&) override {}
};

}  // namespace
}  // namespace kolo::mpi

int main(int argc, char** argv) {
  using namespace kolo::mpi;
  MPI_Init(&argc, &argv);
  Setup& s = setup();
  MPI_Comm_rank(MPI_COMM_WORLD, &s.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &s.size);
  // Pre-faulted, as kolo's own buffers are.
  s.in.assign(static_cast<size_t>(kMaxBytes), 1);
  s.out.assign(static_cast<size_t>(kMaxBytes), 2);
  kolo::Status made = ShmCollectives::create(MPI_COMM_WORLD, ShmCollectives::kDefaultSlotBytes,
                                             nullptr, &s.engine);
  if (!made.ok()) {
    fprintf(stderr, "shm_collectives_bench: %s\n", made.to_string().c_str());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  benchmark::Initialize(&argc, argv);
  register_all();
  if (s.rank == 0) {
    benchmark::RunSpecifiedBenchmarks();
  } else {
    SilentReporter silent;
    benchmark::RunSpecifiedBenchmarks(&silent);
  }
  benchmark::Shutdown();
  s.engine.reset();
  MPI_Finalize();
  return 0;
}
