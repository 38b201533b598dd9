// The node's AND with and without bytes riding beside it (Note [Data rides with
// the AND] in src/core/negotiator.h), board to board: no coordinator. Run under
// mpiexec on one node, e.g.
//
//   mpiexec.mpich -bind-to core -n 2 build/bin/node_and_bench
//
// BM_And/bytes:       one AND of a 4-word vector (the negotiation's for up to 64
//                     cached tensors); `bytes` unused.
// BM_AndCarry/bytes:  each rank writes `bytes` of float32 at its carry slot, the
//                     AND, then reduces every rank's carried copy in rank order
//                     into its output: a cached allreduce riding with the AND.
// BM_AndThenRound/bytes: the AND, then a second round on another board that
//                     carries the same bytes and is reduced the same way: the two
//                     rendezvous of a small allreduce before the carry.
// Every rank runs the same benchmarks with the same fixed iteration counts (each
// iteration is collective); rank 0 reports.
#include <benchmark/benchmark.h>
#include <mpi.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "bench/rank0_reports.h"
#include "reduce/reduce.h"
#include "bench/node_over_mpi.h"
#include "transports/shm/node_and.h"

namespace kolo::shm {
namespace {

constexpr int64_t kIterations = 20000;

struct Setup {
  std::unique_ptr<NodeAnd> board, second;
  std::vector<float> in, out;
  int rank = 0, size = 1;
};

Setup& setup() {
  static Setup s;
  return s;
}

// Writes this rank's floats at the board's carry slot, runs the AND, and reduces
// every rank's copy (rank order) into out: false if the ranks' vectors differed.
bool round(NodeAnd& board, std::vector<uint64_t>& bits, int64_t count) {
  Setup& s = setup();
  std::memcpy(board.carry_slot(4, false), s.in.data(), static_cast<size_t>(count) * sizeof(float));
  if (!board.run(&bits).ok() || !board.unanimous()) return false;
  if (s.size == 1) {
    std::memcpy(s.out.data(), board.carried(0), static_cast<size_t>(count) * sizeof(float));
    return true;
  }
  reduce::reduce(s.out.data(), board.carried(0), board.carried(1), count, DataType::kFloat32,
                 ReduceOp::kSum);
  for (int r = 2; r < s.size; ++r)
    reduce::reduce(s.out.data(), s.out.data(), board.carried(r), count, DataType::kFloat32,
                   ReduceOp::kSum);
  return true;
}

void BM_And(benchmark::State& state) {
  std::vector<uint64_t> bits(4);
  for (auto _ : state) {
    bits.assign(4, ~uint64_t{0});
    if (!setup().board->run(&bits).ok()) state.SkipWithError("AND failed");
  }
}

void BM_AndCarry(benchmark::State& state) {
  const int64_t count = state.range(0) / 4;
  std::vector<uint64_t> bits(4);
  for (auto _ : state) {
    bits.assign(4, ~uint64_t{0});
    if (!round(*setup().board, bits, count)) state.SkipWithError("AND failed or differed");
  }
  state.SetBytesProcessed(state.iterations() * state.range(0));
}

void BM_AndThenRound(benchmark::State& state) {
  const int64_t count = state.range(0) / 4;
  std::vector<uint64_t> bits(4);
  for (auto _ : state) {
    bits.assign(4, ~uint64_t{0});
    if (!setup().board->run(&bits).ok()) state.SkipWithError("AND failed");
    bits.assign(4, ~uint64_t{0});
    if (!round(*setup().second, bits, count)) state.SkipWithError("round failed or differed");
  }
  state.SetBytesProcessed(state.iterations() * state.range(0));
}

void register_all() {
  benchmark::RegisterBenchmark("BM_And", BM_And)
      ->Iterations(kIterations)
      ->UseRealTime()
      ->Unit(benchmark::kMicrosecond);
  for (int64_t bytes : {int64_t{8}, int64_t{512}, int64_t{4} << 10, int64_t{16} << 10}) {
    benchmark::RegisterBenchmark("BM_AndCarry", BM_AndCarry)
        ->Arg(bytes)
        ->Iterations(kIterations)
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark("BM_AndThenRound", BM_AndThenRound)
        ->Arg(bytes)
        ->Iterations(kIterations)
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
  }
}

}  // namespace
}  // namespace kolo::shm

int main(int argc, char** argv) {
  using namespace kolo::shm;
  MPI_Init(&argc, &argv);
  Setup& s = setup();
  MPI_Comm_rank(MPI_COMM_WORLD, &s.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &s.size);
  MPI_Comm local = MPI_COMM_NULL;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local);
  int local_size = 0;
  MPI_Comm_size(local, &local_size);
  if (local_size != s.size) {
    if (s.rank == 0) fprintf(stderr, "node_and_bench: every rank must be on one node\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  // Two boards, each on a node layer of its own (a region serves one AND).
  NodeOptions regions;
  regions.node_and = true;
  std::shared_ptr<Node> first_node, second_node;
  kolo::Status made = kolo::bench::node_over_world(regions, &first_node);
  if (made.ok()) made = kolo::bench::node_over_world(regions, &second_node);
  if (made.ok()) made = NodeAnd::create(first_node, nullptr, &s.board);
  if (made.ok()) made = NodeAnd::create(second_node, nullptr, &s.second);
  if (!made.ok()) {
    fprintf(stderr, "node_and_bench: %s\n", made.to_string().c_str());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  // Pre-faulted, as kolo's own buffers are.
  s.in.assign(NodeAnd::kCarryBytes / sizeof(float), 1.0f + static_cast<float>(s.rank));
  s.out.assign(NodeAnd::kCarryBytes / sizeof(float), 0.0f);
  benchmark::Initialize(&argc, argv);
  register_all();
  kolo::bench::run_reporting_on_rank0(s.rank);
  benchmark::Shutdown();
  s.board.reset();
  s.second.reset();
  MPI_Comm_free(&local);
  MPI_Finalize();
  return 0;
}
