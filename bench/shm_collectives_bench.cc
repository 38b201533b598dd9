// The shm collectives engine (transports/shm/collectives.h) against MPI's
// blocking collectives, engine to engine: no coordinator, no negotiation, the
// same pre-faulted buffers. Run under mpiexec on one node, e.g.
//
//   mpiexec.mpich -bind-to core -n 2 build/bin/shm_collectives_bench
//       [--engine=auto|slots|single] [--slot_bytes=N] [--stream_from=N]
//       [--slot_stores=auto|plain|stream] [--stream_slot_from=N]
//       [--broadcast_pieces_max_bytes=N] [--far_broadcast_pieces_above=N]
//       [--one_pass_from=N] [--one_pass_to=N]
//
// --engine picks the engine's path for every call: auto (the default rule),
// slots (data through the slots only) or single (single copy from 0 bytes,
// where the node allows it); --slot_bytes the slot size (default the engine's);
// --stream_from the output size from which outputs are written with streaming
// stores (default the engine's); --slot_stores how the slots are written
// (default auto: measured, Note [Streaming slots across distant cores]);
// --stream_slot_from the largest block from which slots may be streamed;
// --broadcast_pieces_max_bytes the largest broadcast cut into pieces near
// (Note [Small broadcasts in pieces, near]; 0: none); --far_broadcast_pieces_above
// the size above which broadcasts are cut into pieces far apart (Note [Large
// broadcasts in pieces, far]; a huge N: none); --one_pass_from/--one_pass_to the
// output sizes per rank whose allgathers and alltoalls read the peers' inputs in
// one pass (Note [One pass from the peers' inputs]).
// Sizes 4 KiB to 256 MiB (x4 to 1 MiB plus 512 KiB, then x16 plus 4 and 64 MiB); buffers of 256 MiB per rank.
// Every rank runs the same benchmarks with the same fixed iteration counts (a
// collective cannot let each rank choose its own); rank 0 reports. Bytes are
// those of the perf tool's rows: allgather and alltoall the output, reducescatter
// the input, broadcast the buffer. Inputs are not checked here
// (shm_collectives_test does that).
#include <benchmark/benchmark.h>
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "bench/rank0_reports.h"
#include "bench/node_over_mpi.h"
#include "transports/shm/collectives.h"

namespace kolo::shm {
namespace {

using transport::CollectiveView;

constexpr int64_t kMaxBytes = int64_t{256} << 20;
constexpr int64_t kMovedBytes = int64_t{64} << 20;  // about this much moved per benchmark

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
CollectiveView view_for(Collective op, int64_t bytes) {
  Setup& s = setup();
  const int64_t per = std::max<int64_t>(1, bytes / 4 / s.size);
  CollectiveView v;
  v.input = s.in.data();
  v.output = s.out.data();
  v.dtype = DataType::kFloat32;
  switch (op) {
    case Collective::kBroadcast:
      v.count = bytes / 4;
      v.input = s.out.data();  // in place, as the executor hands host broadcasts over
      break;
    case Collective::kAlltoall:
      v.send_counts.assign(static_cast<size_t>(s.size), per);
      v.recv_counts = v.send_counts;
      v.alltoall_total = per * s.size * s.size;  // as the executor gives it
      break;
    default:
      v.recv_counts.assign(static_cast<size_t>(s.size), per);
      break;
  }
  return v;
}

void BM_Shm(benchmark::State& state, Collective op) {
  const CollectiveView v = view_for(op, state.range(0));
  for (auto _ : state) {
    Status st = setup().engine->run(op, v);
    if (!st.ok()) state.SkipWithError(st.to_string().c_str());
  }
  state.SetBytesProcessed(state.iterations() * state.range(0));
}

void BM_Mpi(benchmark::State& state, Collective op) {
  const CollectiveView v = view_for(op, state.range(0));
  const int per = static_cast<int>(v.recv_counts.empty() ? 0 : v.recv_counts[0]);
  std::vector<int> counts(static_cast<size_t>(setup().size), per);
  for (auto _ : state) {
    switch (op) {
      case Collective::kAllgather:
        MPI_Allgather(v.input, per, MPI_FLOAT, v.output, per, MPI_FLOAT, MPI_COMM_WORLD);
        break;
      case Collective::kBroadcast:
        MPI_Bcast(v.output, static_cast<int>(v.count), MPI_FLOAT, 0, MPI_COMM_WORLD);
        break;
      case Collective::kAlltoall:
        MPI_Alltoall(v.input, per, MPI_FLOAT, v.output, per, MPI_FLOAT, MPI_COMM_WORLD);
        break;
      case Collective::kReducescatter:
        MPI_Reduce_scatter(v.input, v.output, counts.data(), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        break;
      default:
        state.SkipWithError("not a transport collective");
        return;
    }
  }
  state.SetBytesProcessed(state.iterations() * state.range(0));
}

void register_all() {
  const std::pair<const char*, Collective> ops[] = {
      {"allgather", Collective::kAllgather},
      {"broadcast", Collective::kBroadcast},
      {"alltoall", Collective::kAlltoall},
      {"reducescatter", Collective::kReducescatter}};
  for (const auto& [name, op] : ops) {
    for (int64_t bytes : {int64_t{4} << 10, int64_t{16} << 10, int64_t{64} << 10,
                          int64_t{256} << 10, int64_t{512} << 10, int64_t{1} << 20, int64_t{4} << 20,
                          int64_t{16} << 20, int64_t{64} << 20, kMaxBytes}) {
      // A fixed count, the same on every rank: about kMovedBytes per benchmark.
      const int64_t iterations =
          std::max<int64_t>(5, std::min<int64_t>(2000, kMovedBytes / bytes));
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

}  // namespace
}  // namespace kolo::shm

namespace kolo::shm {
namespace {

struct Flags {
  std::string engine = "auto";
  size_t slot_bytes = ShmCollectives::kDefaultSlotBytes;
  size_t stream_from = 0;  // 0: the engine's default
  int64_t stream_slot_from = -1;  // < 0: the engine's default
  std::string slot_stores = "auto";
  int64_t broadcast_pieces_max_bytes = -1;  // < 0: the engine's default
  int64_t far_broadcast_pieces_above = -1;  // < 0: the engine's default
  int64_t one_pass_from = -1, one_pass_to = -1;  // < 0: the engine's default
};

// Takes this bench's own flags out of argv (the rest are Google Benchmark's).
bool parse_flags(int* argc, char** argv, Flags* f) {
  int kept = 1;
  for (int i = 1; i < *argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--engine=", 0) == 0) {
      f->engine = a.substr(9);
      if (f->engine != "auto" && f->engine != "slots" && f->engine != "single") return false;
    } else if (a.rfind("--slot_stores=", 0) == 0) {
      f->slot_stores = a.substr(14);
      if (f->slot_stores != "auto" && f->slot_stores != "plain" && f->slot_stores != "stream")
        return false;
    } else if (a.rfind("--stream_from=", 0) == 0) {
      f->stream_from = std::strtoull(a.c_str() + 14, nullptr, 10);
    } else if (a.rfind("--broadcast_pieces_max_bytes=", 0) == 0) {
      f->broadcast_pieces_max_bytes = std::strtoll(a.c_str() + 29, nullptr, 10);
    } else if (a.rfind("--far_broadcast_pieces_above=", 0) == 0) {
      f->far_broadcast_pieces_above = std::strtoll(a.c_str() + 29, nullptr, 10);
    } else if (a.rfind("--one_pass_from=", 0) == 0) {
      f->one_pass_from = std::strtoll(a.c_str() + 16, nullptr, 10);
    } else if (a.rfind("--one_pass_to=", 0) == 0) {
      f->one_pass_to = std::strtoll(a.c_str() + 14, nullptr, 10);
    } else if (a.rfind("--stream_slot_from=", 0) == 0) {
      f->stream_slot_from = std::strtoll(a.c_str() + 19, nullptr, 10);
    } else if (a.rfind("--slot_bytes=", 0) == 0) {
      f->slot_bytes = std::strtoull(a.c_str() + 13, nullptr, 10);
      if (f->slot_bytes == 0) return false;
    } else {
      argv[kept++] = argv[i];
    }
  }
  *argc = kept;
  return true;
}

}  // namespace
}  // namespace kolo::shm

int main(int argc, char** argv) {
  using namespace kolo::shm;
  MPI_Init(&argc, &argv);
  Flags flags;
  if (!parse_flags(&argc, argv, &flags)) {
    fprintf(stderr,
            "shm_collectives_bench: --engine=auto|slots|single, --slot_bytes=N > 0, "
            "--stream_from=N, --stream_slot_from=N, --slot_stores=auto|plain|stream,\n"
            "--broadcast_pieces_max_bytes=N, --far_broadcast_pieces_above=N,\n"
            "--one_pass_from=N, --one_pass_to=N\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  Setup& s = setup();
  MPI_Comm_rank(MPI_COMM_WORLD, &s.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &s.size);
  // Pre-faulted, as kolo's own buffers are.
  s.in.assign(static_cast<size_t>(kMaxBytes), 1);
  s.out.assign(static_cast<size_t>(kMaxBytes), 2);
  ShmCollectives::Options o;
  if (flags.engine == "slots") o.single_copy_min_bytes = SIZE_MAX;
  if (flags.engine == "single") o.single_copy_min_bytes = 0;
  if (flags.stream_from > 0)
    o.stream_output_min_bytes = o.broadcast_stream_output_min_bytes = flags.stream_from;
  if (flags.stream_slot_from >= 0) o.stream_slot_min_bytes = static_cast<size_t>(flags.stream_slot_from);
  if (flags.broadcast_pieces_max_bytes >= 0)
    o.broadcast_pieces_max_bytes = static_cast<size_t>(flags.broadcast_pieces_max_bytes);
  if (flags.far_broadcast_pieces_above >= 0)
    o.far_broadcast_pieces_above_bytes = static_cast<size_t>(flags.far_broadcast_pieces_above);
  if (flags.one_pass_from >= 0) o.one_pass_min_bytes = static_cast<size_t>(flags.one_pass_from);
  if (flags.one_pass_to >= 0) o.one_pass_max_bytes = static_cast<size_t>(flags.one_pass_to);
  if (flags.slot_stores == "plain") o.slot_stores = ShmCollectives::SlotStores::kPlain;
  if (flags.slot_stores == "stream") o.slot_stores = ShmCollectives::SlotStores::kStreaming;
  NodeOptions regions;
  regions.collectives_slot_bytes = flags.slot_bytes;
  std::shared_ptr<Node> node;
  kolo::Status made = kolo::bench::node_over_world(regions, &node);
  if (made.ok()) made = ShmCollectives::create(node, nullptr, o, &s.engine);
  if (!made.ok()) {
    fprintf(stderr, "shm_collectives_bench: %s\n", made.to_string().c_str());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  benchmark::AddCustomContext("slot_stores", flags.slot_stores);
  benchmark::AddCustomContext("engine", flags.engine);
  benchmark::AddCustomContext("slot_bytes", std::to_string(s.engine->slot_bytes()));
  benchmark::AddCustomContext("single_copy", s.engine->single_copy() ? "yes" : "no");
  benchmark::Initialize(&argc, argv);
  register_all();
  kolo::bench::run_reporting_on_rank0(s.rank);
  benchmark::Shutdown();
  s.engine.reset();
  MPI_Finalize();
  return 0;
}
