// kolo's collectives over point-to-point verbs (src/algorithms/p2p_collectives.h,
// deterministic_allreduce.h) on MPI's verbs, against MPI's own collectives,
// engine to engine (no coordinator). Run under mpiexec, e.g.
//
//   mpiexec.mpich -bind-to core -n 4 build/bin/p2p_collectives_bench
//       [--benchmark_filter=Broadcast]
//
// First a correctness pass over MPI's verbs (uneven counts, messages above and
// below MPICH's eager limit, every collective): rank 0 prints "#wrong N" and the
// program exits 1 if N > 0. Then the timings: BM_Broadcast/tree and /chain force
// each broadcast algorithm (Note [Tree or chain]); BM_P2P/<collective> and
// BM_Mpi/<collective> compare with MPI; BM_Allreduce/ring and /deterministic
// compare the deterministic allreduce with the ring. Every rank runs the same
// benchmarks with the same fixed iteration counts; rank 0 reports. Bytes: the
// buffer (broadcast, allreduce), the output (allgather, alltoall), the input
// (reducescatter), float32.
#include <benchmark/benchmark.h>
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "algorithms/deterministic_allreduce.h"
#include "algorithms/p2p_collectives.h"
#include "bench/rank0_reports.h"
#include "transports/mpi/mpi_point_to_point.h"

namespace kolo::algorithms {
namespace {

constexpr int64_t kMaxBytes = int64_t{64} << 20;
constexpr int64_t kMovedBytes = int64_t{64} << 20;  // about this much per benchmark

struct Setup {
  std::unique_ptr<mpi::MpiPointToPoint> p2p;
  std::unique_ptr<P2PCollectives> coll;
  std::unique_ptr<RingAllreduce> ring;
  std::unique_ptr<DeterministicAllreduce> det;
  std::vector<float> in, out;
  int rank = 0, size = 1;
};

Setup& setup() {
  static Setup s;
  return s;
}

// --- correctness over MPI's verbs --------------------------------------------

float value(int rank, int64_t i) { return static_cast<float>(rank * 1000 + i % 997); }

// Counts of `per` elements give or take a few, one of them zero.
std::vector<int64_t> uneven(int64_t per, int size) {
  std::vector<int64_t> c;
  for (int r = 0; r < size; ++r) c.push_back(r == 1 ? 0 : per + 7 * r);
  return c;
}

int64_t check_pass(int64_t per) {
  Setup& s = setup();
  const std::vector<int64_t> counts = uneven(per, s.size);
  std::vector<int64_t> displs(s.size, 0);
  for (int r = 1; r < s.size; ++r) displs[r] = displs[r - 1] + counts[r - 1];
  const int64_t total = displs.back() + counts.back();
  int64_t wrong = 0;
  std::vector<float> in(total), out(total), mine(counts[s.rank]);
  for (int64_t i = 0; i < total; ++i) in[i] = value(s.rank, i);
  for (int64_t k = 0; k < counts[s.rank]; ++k) mine[k] = value(s.rank, k);
  wrong += !s.coll->allgatherv(mine.data(), out.data(), counts, displs, DataType::kFloat32).ok();
  for (int r = 0; r < s.size; ++r)
    for (int64_t k = 0; k < counts[r]; ++k) wrong += out[displs[r] + k] != value(r, k);
  wrong += !s.coll->reducescatter(in.data(), out.data(), counts, DataType::kFloat32, ReduceOp::kSum).ok();
  for (int64_t k = 0; k < counts[s.rank]; ++k) {
    float want = 0;
    for (int r = 0; r < s.size; ++r) want += value(r, displs[s.rank] + k);
    wrong += out[k] != want;
  }
  for (auto how : {P2PCollectives::Broadcast::kChain, P2PCollectives::Broadcast::kTree}) {
    s.coll->set_broadcast(how);
    std::vector<float> b(total, s.rank == s.size - 1 ? 5.0f : 0.0f);
    wrong += !s.coll->broadcast(b.data(), total, DataType::kFloat32, s.size - 1).ok();
    wrong += total - std::count(b.begin(), b.end(), 5.0f);
  }
  s.coll->set_broadcast(P2PCollectives::Broadcast::kBySize);
  // Alltoall: counts[d] elements to rank d, from everyone.
  std::vector<int64_t> rc(s.size, counts[s.rank]), rd(s.size);
  for (int r = 0; r < s.size; ++r) rd[r] = r * counts[s.rank];
  std::vector<float> a(s.size * counts[s.rank]);
  wrong += !s.coll->alltoallv(in.data(), counts, displs, a.data(), rc, rd, DataType::kFloat32).ok();
  for (int r = 0; r < s.size; ++r)
    for (int64_t k = 0; k < counts[s.rank]; ++k) wrong += a[rd[r] + k] != value(r, displs[s.rank] + k);
  wrong += !s.det->run(in.data(), out.data(), total, DataType::kFloat32, ReduceOp::kSum).ok();
  for (int64_t i = 0; i < total; ++i) {
    float want = 0;
    for (int r = 0; r < s.size; ++r) want += value(r, i);
    wrong += out[i] != want;
  }
  return wrong;
}

// --- timings -------------------------------------------------------------------

void BM_Broadcast(benchmark::State& state, bool tree) {
  Setup& s = setup();
  s.coll->set_broadcast(tree ? P2PCollectives::Broadcast::kTree : P2PCollectives::Broadcast::kChain);
  for (auto _ : state) {
    Status st = s.coll->broadcast(s.out.data(), state.range(0) / 4, DataType::kFloat32, 0);
    if (!st.ok()) state.SkipWithError(st.to_string().c_str());
  }
  s.coll->set_broadcast(P2PCollectives::Broadcast::kBySize);
  state.SetBytesProcessed(state.iterations() * state.range(0));
}

// The view of `bytes` of float32 (bytes as the header says).
transport::CollectiveView view_for(transport::CollectiveOp op, int64_t bytes) {
  Setup& s = setup();
  const int64_t per = std::max<int64_t>(1, bytes / 4 / s.size);
  transport::CollectiveView v;
  v.input = s.in.data();
  v.output = s.out.data();
  v.dtype = DataType::kFloat32;
  if (op == transport::CollectiveOp::kBroadcast) v.count = bytes / 4, v.input = s.out.data();
  if (op == transport::CollectiveOp::kAlltoall) v.send_counts.assign(s.size, per);
  if (op != transport::CollectiveOp::kBroadcast) v.recv_counts.assign(s.size, per);
  return v;
}

void BM_P2P(benchmark::State& state, transport::CollectiveOp op) {
  const transport::CollectiveView v = view_for(op, state.range(0));
  for (auto _ : state) {
    Status st = setup().coll->run(op, v);
    if (!st.ok()) state.SkipWithError(st.to_string().c_str());
  }
  state.SetBytesProcessed(state.iterations() * state.range(0));
}

void BM_Mpi(benchmark::State& state, transport::CollectiveOp op) {
  const transport::CollectiveView v = view_for(op, state.range(0));
  const int per = static_cast<int>(v.recv_counts.empty() ? 0 : v.recv_counts[0]);
  std::vector<int> counts(setup().size, per);
  for (auto _ : state) {
    switch (op) {
      case transport::CollectiveOp::kAllgather:
        MPI_Allgather(v.input, per, MPI_FLOAT, v.output, per, MPI_FLOAT, MPI_COMM_WORLD);
        break;
      case transport::CollectiveOp::kBroadcast:
        MPI_Bcast(v.output, static_cast<int>(v.count), MPI_FLOAT, 0, MPI_COMM_WORLD);
        break;
      case transport::CollectiveOp::kAlltoall:
        MPI_Alltoall(v.input, per, MPI_FLOAT, v.output, per, MPI_FLOAT, MPI_COMM_WORLD);
        break;
      case transport::CollectiveOp::kReducescatter:
        MPI_Reduce_scatter(v.input, v.output, counts.data(), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        break;
    }
  }
  state.SetBytesProcessed(state.iterations() * state.range(0));
}

void BM_Allreduce(benchmark::State& state, bool deterministic) {
  Setup& s = setup();
  const int64_t count = state.range(0) / 4;
  for (auto _ : state) {
    Status st = deterministic
                    ? s.det->run(s.in.data(), s.out.data(), count, DataType::kFloat32, ReduceOp::kSum)
                    : s.ring->run(s.in.data(), s.out.data(), count, DataType::kFloat32, ReduceOp::kSum);
    if (!st.ok()) state.SkipWithError(st.to_string().c_str());
  }
  state.SetBytesProcessed(state.iterations() * state.range(0));
}

template <typename Fn, typename Arg>
void add(const std::string& label, Fn fn, Arg arg, int64_t bytes) {
  // A fixed count, the same on every rank: about kMovedBytes per benchmark.
  const int64_t iterations = std::max<int64_t>(5, std::min<int64_t>(2000, kMovedBytes / bytes));
  benchmark::RegisterBenchmark(label.c_str(), fn, arg)
      ->Arg(bytes)
      ->Iterations(iterations)
      ->UseRealTime()
      ->Unit(benchmark::kMicrosecond);
}

void register_all() {
  const std::vector<int64_t> sizes = {int64_t{1} << 10,  int64_t{4} << 10,  int64_t{16} << 10,
                                      int64_t{64} << 10, int64_t{256} << 10, int64_t{1} << 20,
                                      int64_t{4} << 20,  int64_t{16} << 20, kMaxBytes};
  for (int64_t bytes : sizes) {
    add("BM_Broadcast/tree", BM_Broadcast, true, bytes);
    add("BM_Broadcast/chain", BM_Broadcast, false, bytes);
  }
  const std::pair<const char*, transport::CollectiveOp> ops[] = {
      {"allgather", transport::CollectiveOp::kAllgather},
      {"broadcast", transport::CollectiveOp::kBroadcast},
      {"alltoall", transport::CollectiveOp::kAlltoall},
      {"reducescatter", transport::CollectiveOp::kReducescatter}};
  for (const auto& [name, op] : ops) {
    for (int64_t bytes : sizes) {
      add(std::string("BM_P2P/") + name, BM_P2P, op, bytes);
      add(std::string("BM_Mpi/") + name, BM_Mpi, op, bytes);
    }
  }
  for (int64_t bytes : sizes) {
    add("BM_Allreduce/ring", BM_Allreduce, false, bytes);
    add("BM_Allreduce/deterministic", BM_Allreduce, true, bytes);
  }
}

}  // namespace
}  // namespace kolo::algorithms

int main(int argc, char** argv) {
  using namespace kolo::algorithms;
  MPI_Init(&argc, &argv);
  Setup& s = setup();
  MPI_Comm_rank(MPI_COMM_WORLD, &s.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &s.size);
  auto comms = std::make_shared<kolo::mpi::Comms>();
  MPI_Comm_dup(MPI_COMM_WORLD, &comms->data);
  MPI_Comm_set_errhandler(comms->data, MPI_ERRORS_RETURN);
  s.p2p = std::make_unique<kolo::mpi::MpiPointToPoint>(comms);
  s.coll = std::make_unique<P2PCollectives>(*s.p2p);
  s.ring = std::make_unique<RingAllreduce>(*s.p2p);
  s.det = std::make_unique<DeterministicAllreduce>(*s.p2p);
  s.in.assign(static_cast<size_t>(kMaxBytes / 4), 1.0f);
  s.out.assign(static_cast<size_t>(kMaxBytes / 4) * 2, 0.0f);  // alltoall/allgather: up to 2x
  int64_t wrong = 0;
  // Below and above MPICH's eager limit, and several of the ring's segments.
  for (int64_t per : {int64_t{3}, int64_t{3000}, int64_t{200000}}) wrong += check_pass(per);
  int64_t all = 0;
  MPI_Allreduce(&wrong, &all, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  if (s.rank == 0) std::printf("#wrong %lld\n", static_cast<long long>(all));
  if (all == 0) {
    benchmark::Initialize(&argc, argv);
    register_all();
    kolo::bench::run_reporting_on_rank0(s.rank);
  }
  s.det.reset();
  s.ring.reset();
  s.coll.reset();
  s.p2p.reset();
  comms.reset();
  MPI_Finalize();
  return all == 0 ? 0 : 1;
}
