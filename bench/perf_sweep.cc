// Note [How one size is timed]
// For each size, warmup_iters + iters iterations run back to back on every rank.
// One iteration is one kolo_allreduce_async + kolo_wait of the same tensor name (so
// from the second iteration on kolo's response cache serves it, as in a training
// loop); with -r mpi each kolo iteration is followed by one MPI_Allreduce of the
// same size, so both see the same machine state. Each rank times each iteration on
// its own clock; after the loop (not inside it) one MPI_Allreduce(MAX) gives each
// iteration's slowest rank, and the reported time is the median of those maxima.
// With -c 1 the output buffer is poisoned before every iteration and compared with
// the expected result after it, outside the timed region (see Note [Exact inputs]).
#include "bench/perf_sweep.h"

#include <kolo/kolo.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "bench/perf_buffer.h"
#include "bench/perf_data.h"
#include "bench/perf_kolo.h"
#include "bench/perf_mpi.h"
#include "bench/perf_report.h"

namespace kolo::bench {
namespace {

struct SizeResult {
  int64_t count = 0;
  double time_s = 0, ref_time_s = 0;
  int64_t wrong = 0, ref_wrong = 0;
};

// The buffers every size uses: allocated once for the largest size; the input and
// expected patterns do not depend on the count, so smaller sizes use prefixes.
struct SweepBuffers {
  Buffer input, output, expected, ref_output;
};

SweepBuffers make_buffers(const PerfOptions& o, int64_t max_count, int rank, int size) {
  const size_t bytes = static_cast<size_t>(max_count) * dtype_size(o.dtype);
  SweepBuffers b;
  b.input = Buffer(bytes);
  b.output = Buffer(bytes);
  fill_input(b.input.data(), max_count, o.dtype, o.op, rank);
  if (o.check) {
    b.expected = Buffer(bytes);
    fill_expected(b.expected.data(), max_count, o.dtype, o.op, size);
  }
  if (o.reference_mpi) b.ref_output = Buffer(bytes);
  return b;
}

int64_t count_of(const PerfOptions& o, int64_t bytes) {
  return std::max<int64_t>(1, bytes / static_cast<int64_t>(dtype_size(o.dtype)));
}

// Times one iteration of `run` into *seconds; checks `output` when asked.
template <class Run>
void timed_iteration(const PerfOptions& o, int64_t count, char* output, const char* expected,
                     Run run, double* seconds, int64_t* wrong) {
  if (o.check) poison(output, count, o.dtype);
  double start = now_seconds();
  run();
  *seconds = now_seconds() - start;
  if (o.check) *wrong += count_wrong(output, expected, count, o.dtype);
}

SizeResult run_size(MPI_Comm comm, const PerfOptions& o, const SweepBuffers& b,
                    const MpiReference* ref, int64_t count) {
  SizeResult r;
  r.count = count;
  std::vector<double> times(o.iters), ref_times(o.iters);
  const std::string name = "allreduce_perf." + std::to_string(count);
  for (int it = -o.warmup_iters; it < o.iters; ++it) {
    double t = 0;
    timed_iteration(
        o, count, b.output.data(), b.expected.data(),
        [&] { kolo_allreduce(comm, name, b.input.data(), b.output.data(), count, o.dtype, o.op); },
        &t, &r.wrong);
    if (it >= 0) times[it] = t;
    if (ref == nullptr) continue;
    timed_iteration(
        o, count, b.ref_output.data(), b.expected.data(),
        [&] { ref->allreduce(b.input.data(), b.ref_output.data(), count); }, &t, &r.ref_wrong);
    if (it >= 0) ref_times[it] = t;
  }
  r.time_s = median(max_over_ranks(comm, times));
  r.wrong = sum_over_ranks(comm, r.wrong);
  if (ref != nullptr) {
    r.ref_time_s = median(max_over_ranks(comm, ref_times));
    r.ref_wrong = sum_over_ranks(comm, r.ref_wrong);
  }
  return r;
}

void print_header(const PerfOptions& o, int world_size) {
  std::printf(
      "# kolo-allreduce-perf (kolo %s): nranks %d, transport %s, every op through "
      "kolo_allreduce_async + kolo_wait\n",
      kolo_version(), world_size, effective_transport().c_str());
  std::printf(
      "#  minBytes %lld maxBytes %lld step: %lld(factor) warmup iters: %d iters: %d "
      "validation: %d reference: %s\n",
      static_cast<long long>(o.min_bytes), static_cast<long long>(o.max_bytes),
      static_cast<long long>(o.step_factor), o.warmup_iters, o.iters, o.check ? 1 : 0,
      o.reference_mpi ? "mpi" : "none");
  std::printf(
      "#  time: median over iterations of the slowest rank; busbw = algbw * 2(n-1)/n; "
      "GB = 1e9 B%s\n#\n",
      o.reference_mpi ? "; speedup = ref_time / time" : "");
  std::printf("# %10s %12s %9s %6s %10s %10s %8s %8s %7s", "size", "count", "type", "redop",
              "transport", "time_us", "algbw", "busbw", "#wrong");
  if (o.reference_mpi) std::printf(" %11s %9s %8s", "ref_time_us", "ref_busbw", "speedup");
  std::printf("\n# %10s %12s %9s %6s %10s %10s %8s %8s %7s", "(B)", "(elements)", "", "", "",
              "(us)", "(GB/s)", "(GB/s)", "");
  if (o.reference_mpi) std::printf(" %11s %9s %8s", "(us)", "(GB/s)", "");
  std::printf("\n");
}

// Prints one row (rank 0) and writes it as CSV; returns its busbw.
double report_row(const PerfOptions& o, const SizeResult& r, int world_size, CsvWriter* csv) {
  const double bytes = static_cast<double>(r.count) * dtype_size(o.dtype);
  const double algbw = gb_per_second(bytes, r.time_s);
  const double busbw = algbw * allreduce_bus_factor(world_size);
  const std::string type = dtype_name(o.dtype), transport = effective_transport();
  std::printf("  %10.0f %12lld %9s %6s %10s %10.2f %8.3f %8.3f %7lld", bytes,
              static_cast<long long>(r.count), type.c_str(), redop_name(o.op), transport.c_str(),
              r.time_s * 1e6, algbw, busbw, static_cast<long long>(r.wrong));
  std::vector<std::string> fields = {format("%.0f", bytes),
                                     std::to_string(r.count),
                                     type,
                                     redop_name(o.op),
                                     transport,
                                     format("%.3f", r.time_s * 1e6),
                                     format("%.6f", algbw),
                                     format("%.6f", busbw),
                                     std::to_string(r.wrong),
                                     "",
                                     "",
                                     "",
                                     std::to_string(world_size)};
  if (o.reference_mpi) {
    const double ref_busbw = gb_per_second(bytes, r.ref_time_s) * allreduce_bus_factor(world_size);
    const double speedup = r.time_s > 0 ? r.ref_time_s / r.time_s : 0.0;
    std::printf(" %11.2f %9.3f %8.2f", r.ref_time_s * 1e6, ref_busbw, speedup);
    fields[9] = format("%.3f", r.ref_time_s * 1e6);
    fields[10] = format("%.6f", ref_busbw);
    fields[11] = format("%.4f", speedup);
  }
  std::printf("\n");
  std::fflush(stdout);
  if (csv != nullptr) csv->row(fields);
  return busbw;
}

}  // namespace

int run_sweep(MPI_Comm comm, const PerfOptions& o) {
  int rank = 0, world_size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &world_size);
  std::unique_ptr<CsvWriter> csv;
  if (rank == 0 && !o.csv_path.empty()) {
    csv = std::make_unique<CsvWriter>(
        o.csv_path, std::vector<std::string>{"size", "count", "type", "redop", "transport",
                                             "time_us", "algbw", "busbw", "wrong", "ref_time_us",
                                             "ref_busbw", "speedup", "nranks"});
    if (!csv->ok()) abort_job(comm, "--csv", ("cannot write " + o.csv_path).c_str());
  }
  SweepBuffers buffers = make_buffers(o, count_of(o, o.max_bytes), rank, world_size);
  MpiReference reference(comm, o.dtype, o.op);
  if (rank == 0) print_header(o, world_size);
  double busbw_sum = 0;
  int rows = 0;
  int64_t wrong = 0, ref_wrong = 0;
  for (int64_t bytes = o.min_bytes; bytes <= o.max_bytes; bytes *= o.step_factor) {
    SizeResult r =
        run_size(comm, o, buffers, o.reference_mpi ? &reference : nullptr, count_of(o, bytes));
    wrong += r.wrong;
    ref_wrong += r.ref_wrong;
    if (rank == 0) busbw_sum += report_row(o, r, world_size, csv.get());
    ++rows;
  }
  if (rank == 0) {
    if (o.check) {
      std::printf("# Wrong elements (all sizes, iterations and ranks): %lld %s\n",
                  static_cast<long long>(wrong), wrong == 0 ? "OK" : "FAILED");
    }
    if (ref_wrong != 0) {
      std::printf("# MPI reference wrong elements: %lld\n", static_cast<long long>(ref_wrong));
    }
    std::printf("# Avg bus bandwidth : %.6g\n", rows > 0 ? busbw_sum / rows : 0.0);
    std::fflush(stdout);
  }
  return wrong == 0 ? 0 : 1;
}

}  // namespace kolo::bench
