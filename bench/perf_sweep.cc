// Note [How one size is timed]
// For each size, warmup iterations (Note [Warming up by time]) then iters
// iterations run back to back on every rank.
// One iteration is one kolo_<collective>_async + kolo_wait of the same tensor name (so
// from the second iteration on kolo's response cache serves it, as in a training
// loop); with -r mpi each kolo iteration is followed by one call of the matching MPI
// collective of the same size (with -r nccl, on device buffers: one ncclAllReduce
// and its cudaStreamSynchronize), so both see the same machine state. Each rank times
// each iteration on its own clock; after the loop (not inside it) one
// MPI_Allreduce(MAX) gives each iteration's slowest rank, and the reported time is the
// median of those maxima. With -c 1 the output is poisoned before every iteration and
// compared with the expected result after it, outside the timed region (a broadcast
// iteration then starts from a barrier: Note [The root's preparation is not timed]; see Note
// [Exact inputs] and Note [Exact sequences for data movement]). Sizes, algbw and busbw
// follow nccl-tests: see Note [Sizes and bandwidths per collective].
#include "bench/perf_sweep.h"

#include <kolo/kolo.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "bench/perf_breakdown.h"
#include "bench/perf_collective.h"
#include "bench/perf_device_case.h"
#include "bench/perf_kolo.h"
#include "bench/perf_mpi.h"
#include "bench/perf_report.h"
#include "bench/perf_tensors.h"

namespace kolo::bench {
namespace {

struct SizeResult {
  CollectiveShape shape;
  double time_s = 0, ref_time_s = 0, det_time_s = 0;
  int64_t wrong = 0, ref_wrong = 0;
};

// Note [Warming up by time]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
// MPICH on the development VM runs a size's first calls several times slower
// than later ones (mpiexec.mpich -bind-to core -n 2, MPI alone, median us of
// calls 0-19 / 20-99 / 100-499 / 2000-4999: MPI_Allgather of 4 KiB 7.6 / 3.0 /
// 0.81 / 0.81, of 16 KiB 10.1 / 9.7 / 2.1 / 2.1; MPI_Allreduce of 8 KiB 19.2 /
// 2.5 / 2.5 / 2.5). With nccl-tests' 5 warm-up and 20 timed iterations a small
// size's reference was timed cold: kolo-allreduce-perf --collective allgather
// -b 4K -e 64K -f 4 -r mpi, 3 runs, speedup at 4 KiB / 16 KiB 1.33-1.48 /
// 1.83-2.08 so, 0.27-0.35 / 0.28-0.41 with 100 ms of warm-up, 0.34-0.36 /
// 0.39-0.40 with -w 3000. So after the -w iterations a size keeps warming up
// until --warmup_ms have passed, in rounds of doubling length; after
// each round the ranks agree on the slowest rank's elapsed time (one
// MPI_Allreduce), so every rank runs the same number of calls. Large sizes,
// whose 5 iterations take longer than that, are unaffected.
void warm_up(MPI_Comm comm, const PerfOptions& o, SweepCase* coll, const std::string& name,
             int64_t* wrong, int64_t* ref_wrong) {
  auto once = [&] {
    coll->run_kolo(name, wrong);
    if (o.reference != Reference::kNone) coll->run_reference(ref_wrong);
  };
  const double start = now_seconds();
  for (int i = 0; i < o.warmup_iters; ++i) once();
  if (o.warmup_ms <= 0) return;
  for (int64_t round = std::max(1, o.warmup_iters);; round = std::min<int64_t>(2 * round, 1 << 20)) {
    double elapsed = now_seconds() - start, slowest = 0;
    MPI_Allreduce(&elapsed, &slowest, 1, MPI_DOUBLE, MPI_MAX, comm);
    if (slowest * 1e3 >= static_cast<double>(o.warmup_ms)) return;
    for (int64_t i = 0; i < round; ++i) once();
  }
}

SizeResult run_size(MPI_Comm comm, const PerfOptions& o, SweepCase* coll,
                    const CollectiveShape& shape) {
  SizeResult r;
  r.shape = shape;
  coll->set_shape(shape);
  std::vector<double> times(o.iters), ref_times(o.iters), det_times(o.iters);
  const std::string name =
      std::string(collective_name(o.collective)) + "_perf." + std::to_string(shape.count);
  // --with-deterministic: the same calls with the flag, under another name (a
  // flagged and an unflagged request never share a bucket).
  auto deterministic = [&](int64_t* wrong) {
    set_deterministic(true);
    const double t = coll->run_kolo(name + ".det", wrong);
    set_deterministic(false);
    return t;
  };
  warm_up(comm, o, coll, name, &r.wrong, &r.ref_wrong);
  if (o.with_deterministic)
    for (int i = 0; i < std::max(1, o.warmup_iters); ++i) deterministic(&r.wrong);
  for (int it = 0; it < o.iters; ++it) {
    // Which of the two goes first alternates: a call right after another kolo
    // call finds the coordinator awake, one after MPI's may not.
    const bool det_first = o.with_deterministic && it % 2 == 1;
    if (det_first) det_times[it] = deterministic(&r.wrong);
    times[it] = coll->run_kolo(name, &r.wrong);
    if (o.with_deterministic && !det_first) det_times[it] = deterministic(&r.wrong);
    if (o.reference == Reference::kNone) continue;
    ref_times[it] = coll->run_reference(&r.ref_wrong);
  }
  r.time_s = median(max_over_ranks(comm, times));
  if (o.with_deterministic) r.det_time_s = median(max_over_ranks(comm, det_times));
  r.wrong = sum_over_ranks(comm, r.wrong);
  if (o.reference != Reference::kNone) {
    r.ref_time_s = median(max_over_ranks(comm, ref_times));
    r.ref_wrong = sum_over_ranks(comm, r.ref_wrong);
  }
  return r;
}

const char* redop_column(const PerfOptions& o) {
  return collective_reduces(o.collective) ? redop_name(o.op) : "none";
}

void print_header(const PerfOptions& o, int world_size, const CudaDevice* device) {
  const char* coll = collective_name(o.collective);
  const bool with_reference = o.reference != Reference::kNone;
  std::printf(
      "# kolo-allreduce-perf (kolo %s): %s, nranks %d, transport %s, every op through "
      "kolo_%s_async + kolo_wait%s%s\n",
      kolo_version(), coll, world_size, effective_transport().c_str(), coll,
      o.collective == Collective::kBroadcast ? " (in place, root 0)"
      : o.in_place                           ? " (in place)"
                                             : "",
      o.kolo_memory ? "; buffers from kolo_alloc" : "");
  if (device != nullptr) {
    std::printf(
        "#  device buffers on %s (rank 0), kolo_device_t stream: the benchmark's producer "
        "stream; time = submit -> kolo_wait%s\n",
        device->describe().c_str(),
        o.reference == Reference::kNccl
            ? "; ref = ncclAllReduce on the same buffers, own comm and stream, + "
              "cudaStreamSynchronize"
            : "");
  }
  if (o.tensors > 1) {
    std::printf(
        "#  --tensors %d: each op is %d tensors of the row's size, submitted together then "
        "waited for; ref: %d blocking MPI calls; algbw and busbw count all %d\n",
        o.tensors, o.tensors, o.tensors, o.tensors);
  }
  if (o.into) {
    std::printf(
        "#  kolo's allgather writes into a persistent buffer (kolo_allgather_into), as "
        "the MPI reference does\n");
  } else if (o.collective == Collective::kAllgather || o.collective == Collective::kAlltoall) {
    std::printf(
        "#  kolo hands each timed op's output in its handle, as users get it (storage "
        "recycled between ops: core/output_pool.h); the MPI reference writes into a "
        "persistent buffer\n");
  }
  std::printf(
      "#  minBytes %lld maxBytes %lld step: %lld(factor) warmup iters: %d (and %lld ms) "
      "iters: %d validation: %d reference: %s\n",
      static_cast<long long>(o.min_bytes), static_cast<long long>(o.max_bytes),
      static_cast<long long>(o.step_factor), o.warmup_iters,
      static_cast<long long>(o.warmup_ms), o.iters, o.check ? 1 : 0,
      reference_name(o.reference));
  std::printf(
      "#  time: median over iterations of the slowest rank; size, count: as nccl-tests; "
      "algbw = size / time; busbw = algbw * %s; GB = 1e9 B%s\n#\n",
      bus_factor_text(o.collective), with_reference ? "; speedup = ref_time / time" : "");
  std::printf("# %10s %12s %9s %6s %10s %10s %8s %8s %7s", "size", "count", "type", "redop",
              "transport", "time_us", "algbw", "busbw", "#wrong");
  if (with_reference) std::printf(" %11s %9s %8s", "ref_time_us", "ref_busbw", "speedup");
  if (o.with_deterministic) std::printf(" %11s %8s %8s", "det_time_us", "det/kolo", "ref/det");
  std::printf("\n# %10s %12s %9s %6s %10s %10s %8s %8s %7s", "(B)", "(elements)", "", "", "",
              "(us)", "(GB/s)", "(GB/s)", "");
  if (with_reference) std::printf(" %11s %9s %8s", "(us)", "(GB/s)", "");
  if (o.with_deterministic) std::printf(" %11s %8s %8s", "(us)", "", "");
  std::printf("\n");
}

// Prints one row (rank 0) and writes it as CSV; returns its busbw.
double report_row(const PerfOptions& o, const SizeResult& r, int world_size, CsvWriter* csv) {
  const double bytes = static_cast<double>(r.shape.size()) * dtype_size(o.dtype);
  const double moved = bytes * o.tensors;  // --tensors: every tensor's bytes
  const double factor = bus_factor(o.collective, world_size);
  const double algbw = gb_per_second(moved, r.time_s);
  const double busbw = algbw * factor;
  const std::string type = dtype_name(o.dtype), transport = effective_transport();
  std::printf("  %10.0f %12lld %9s %6s %10s %10.2f %8.3f %8.3f %7lld", bytes,
              static_cast<long long>(r.shape.count), type.c_str(), redop_column(o),
              transport.c_str(), r.time_s * 1e6, algbw, busbw, static_cast<long long>(r.wrong));
  std::vector<std::string> fields = {format("%.0f", bytes),
                                     std::to_string(r.shape.count),
                                     type,
                                     redop_column(o),
                                     transport,
                                     format("%.3f", r.time_s * 1e6),
                                     format("%.6f", algbw),
                                     format("%.6f", busbw),
                                     std::to_string(r.wrong),
                                     "",
                                     "",
                                     "",
                                     std::to_string(world_size),
                                     collective_name(o.collective)};
  if (o.reference != Reference::kNone) {
    const double ref_busbw = gb_per_second(moved, r.ref_time_s) * factor;
    const double speedup = r.time_s > 0 ? r.ref_time_s / r.time_s : 0.0;
    std::printf(" %11.2f %9.3f %8.2f", r.ref_time_s * 1e6, ref_busbw, speedup);
    fields[9] = format("%.3f", r.ref_time_s * 1e6);
    fields[10] = format("%.6f", ref_busbw);
    fields[11] = format("%.4f", speedup);
  }
  if (o.with_deterministic) {
    std::printf(" %11.2f %8.2f %8.2f", r.det_time_s * 1e6,
                r.time_s > 0 ? r.det_time_s / r.time_s : 0.0,
                r.det_time_s > 0 ? r.ref_time_s / r.det_time_s : 0.0);
  }
  std::printf("\n");
  std::fflush(stdout);
  if (csv != nullptr) csv->row(fields);
  return busbw;
}

}  // namespace

int run_sweep(MPI_Comm comm, const PerfOptions& o, CudaDevice* device) {
  int rank = 0, world_size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &world_size);
  std::unique_ptr<CsvWriter> csv;
  if (rank == 0 && !o.csv_path.empty()) {
    csv = std::make_unique<CsvWriter>(
        o.csv_path, std::vector<std::string>{"size", "count", "type", "redop", "transport",
                                             "time_us", "algbw", "busbw", "wrong", "ref_time_us",
                                             "ref_busbw", "speedup", "nranks", "collective"});
    if (!csv->ok()) abort_job(comm, "--csv", ("cannot write " + o.csv_path).c_str());
  }
  set_blocking(o.blocking);
  std::unique_ptr<SweepCase> coll;
  if (device != nullptr) {
    coll = std::make_unique<DeviceAllreduceCase>(comm, o, o.max_bytes, device);
  } else if (o.tensors > 1) {
    coll = std::make_unique<TensorsCase>(comm, o, o.max_bytes);
  } else {
    coll = std::make_unique<CollectiveCase>(comm, o, o.max_bytes);
  }
  if (o.breakdown) breakdown_enable();
  if (rank == 0) print_header(o, world_size, device);
  double busbw_sum = 0;
  int rows = 0;
  int64_t wrong = 0, ref_wrong = 0;
  for (int64_t bytes = o.min_bytes; bytes <= o.max_bytes; bytes *= o.step_factor) {
    SizeResult r = run_size(comm, o, coll.get(), coll->shape_of(bytes));
    wrong += r.wrong;
    ref_wrong += r.ref_wrong;
    if (rank == 0) busbw_sum += report_row(o, r, world_size, csv.get());
    breakdown_report(comm, o.iters);
    ++rows;
  }
  if (rank == 0) {
    if (o.check) {
      std::printf("# Wrong elements (all sizes, iterations and ranks): %lld %s\n",
                  static_cast<long long>(wrong), wrong == 0 ? "OK" : "FAILED");
    }
    if (ref_wrong != 0) {
      std::printf("# %s reference wrong elements: %lld\n",
                  o.reference == Reference::kNccl ? "NCCL" : "MPI",
                  static_cast<long long>(ref_wrong));
    }
    std::printf("# Avg bus bandwidth : %.6g\n", rows > 0 ? busbw_sum / rows : 0.0);
    std::fflush(stdout);
  }
  return wrong == 0 ? 0 : 1;
}

}  // namespace kolo::bench
