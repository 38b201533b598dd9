// Note [The gradient-set variants]
// A step is what a data-parallel trainer does once backward has produced every
// gradient: average each gradient tensor over the ranks. The profile's tensors are
// slices of one input arena and one output arena (out of place, persistent,
// touched once). Variants, each timed per step (max over ranks, median over steps,
// as in Note [How one size is timed]):
//   kolo_fused     every tensor submitted with kolo_allreduce_async(op average) in
//                  reverse layer order, as backward produces them, then all waited
//                  for; fusion threshold: KOLO_FUSION_THRESHOLD from the
//                  environment, else kolo's default.
//   kolo_unfused   the same with KOLO_FUSION_THRESHOLD=0 (a fresh kolo session:
//                  kolo_shutdown, setenv, kolo_init; MPI stays up, it is ours).
//   mpi_per_tensor one blocking MPI_Allreduce(SUM) per tensor, then the 1/n scale.
//   mpi_concat     copy every tensor into one persistent buffer, one MPI_Allreduce,
//                  copy out scaling by 1/n (the copies are timed).
// speedup_vs_mpi = the faster MPI variant's step time / this variant's step time.
//
// With --in-place (host only) every variant reduces the output arena in place, as
// Horovod's optimizer averages gradients where they lie: before each step the
// output arena is refilled from the input arena instead of poisoned (untimed,
// then the barrier), and each tensor's input is its output (MPI: MPI_IN_PLACE).
// With --memory kolo the two arenas come from kolo_alloc.
//
// With --autotune, kolo_unfused gives way to (Note [Timing autotune]):
//   kolo_defaults  every knob autotune tunes unset: kolo's hand-tuned defaults.
//   kolo_autotuned KOLO_AUTOTUNE=1 from the environment's knobs (kolo_fused's):
//                  steps, checked but untimed, until every rank has applied the
//                  frozen setting; then the usual warm-up and timed steps.
//
// With -t nccl the arenas are device memory (cudaMalloc, written once from the host
// data) and kolo gets kolo_device_t{CUDA, ordinal, producer stream}; the references
// are NCCL's, on their own communicator and stream:
//   nccl_per_tensor one ncclAllReduce(avg) per tensor in reverse layer order, then
//                   one cudaStreamSynchronize.
//   nccl_concat     cudaMemcpyAsync of every tensor into one persistent device
//                   buffer, one ncclAllReduce(avg) in place, cudaMemcpyAsync out,
//                   cudaStreamSynchronize (the copies are timed).
// and the last column is speedup_vs_nccl. Checking copies the output arena to the
// host after each step, outside the timed region.
#include "bench/perf_model.h"

#include <kolo/kolo.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bench/perf_buffer.h"
#include "bench/perf_cuda.h"
#include "bench/perf_data.h"
#include "bench/perf_kolo.h"
#include "bench/perf_mpi.h"
#include "bench/perf_report.h"
#include "bench/profile.h"
#include "reduce/reduce.h"

namespace kolo::bench {
namespace {

constexpr ReduceOp kOp = ReduceOp::kAverage;

struct ModelRun {
  MPI_Comm comm;
  const PerfOptions& options;
  Profile profile;
  std::vector<int64_t> offsets;  // element offset of each tensor in the arenas
  Buffer input, output, expected, concat;
  int rank = 0, world_size = 1;
  CudaDevice* device = nullptr;  // -t nccl: the arenas below are used instead
  DeviceMemory device_input, device_output, device_concat;
  Buffer result;  // host copy of device_output, for the check

  char* input_arena() const { return device ? device_input.data() : input.data(); }
  char* output_arena() const { return device ? device_output.data() : output.data(); }
  char* concat_arena() const { return device ? device_concat.data() : concat.data(); }
  char* in(size_t t) const {
    return (options.in_place ? output_arena() : input_arena()) + offsets[t] * elem();
  }
  char* out(size_t t) const { return output_arena() + offsets[t] * elem(); }
  size_t elem() const { return dtype_size(profile.dtype); }
  const char* reference_kind() const { return device ? "nccl" : "mpi"; }
};

struct VariantResult {
  std::string name;
  double step_s = 0;
  int64_t wrong = 0;
};

void prepare(ModelRun* m) {
  const int64_t n = m->profile.total_elements;
  const size_t bytes = static_cast<size_t>(m->profile.total_bytes());
  int64_t offset = 0;
  for (const ProfileTensor& t : m->profile.tensors) {
    m->offsets.push_back(offset);
    offset += t.elements;
  }
  m->input = Buffer(bytes, m->options.kolo_memory);
  fill_input(m->input.data(), n, m->profile.dtype, kOp, m->rank);
  if (m->options.check) {
    m->expected = Buffer(bytes);
    fill_expected(m->expected.data(), n, m->profile.dtype, kOp, m->world_size);
  }
  if (m->device == nullptr) {
    m->output = Buffer(bytes, m->options.kolo_memory);
    m->concat = Buffer(bytes);
    return;
  }
  m->device_input = m->device->allocate(bytes);
  m->device->upload(m->device_input.data(), m->input.data(), bytes);
  m->input = Buffer();
  m->device_output = m->device->allocate(bytes);
  m->device_concat = m->device->allocate(bytes);
  if (m->options.check) m->result = Buffer(bytes);
}

// Before a step: the output arena poisoned, or (--in-place) refilled from the input.
void poison_output(const ModelRun& m) {
  if (m.options.in_place) {
    std::memcpy(m.output.data(), m.input.data(), static_cast<size_t>(m.profile.total_bytes()));
    return;
  }
  if (m.device == nullptr) {
    return poison(m.output.data(), m.profile.total_elements, m.profile.dtype);
  }
  m.device->fill(m.device_output.data(), 0xff, static_cast<size_t>(m.profile.total_bytes()));
}

int64_t wrong_in_output(const ModelRun& m) {
  const char* got = m.output.data();
  if (m.device != nullptr) {
    m.device->download(m.result.data(), m.device_output.data(),
                       static_cast<size_t>(m.profile.total_bytes()));
    got = m.result.data();
  }
  return count_wrong(got, m.expected.data(), m.profile.total_elements, m.profile.dtype);
}

// Runs warmup + timed steps of `step`, checking the output arena after each.
VariantResult time_steps(ModelRun* m, const std::string& name, const std::function<void()>& step) {
  const PerfOptions& o = m->options;
  VariantResult r;
  r.name = name;
  std::vector<double> times(o.iters);
  for (int it = -o.warmup_iters; it < o.iters; ++it) {
    if (o.check || o.in_place) poison_output(*m);
    // A common start line: without it a rank still checking the last step's
    // output makes the other rank's step look longer by the difference.
    MPI_Barrier(m->comm);
    double start = now_seconds();
    step();
    double t = now_seconds() - start;
    if (o.check) r.wrong += wrong_in_output(*m);
    if (it >= 0) times[it] = t;
  }
  r.step_s = median(max_over_ranks(m->comm, times));
  r.wrong = sum_over_ranks(m->comm, r.wrong);
  return r;
}

void kolo_step(const ModelRun& m, std::vector<kolo_handle_t>* handles) {
  const kolo_device_t device =
      m.device ? m.device->kolo_device() : kolo_device_t{KOLO_DEVICE_CPU, 0, nullptr};
  const auto dtype = static_cast<kolo_dtype_t>(m.profile.dtype);
  const size_t count = m.profile.tensors.size();
  for (size_t i = 0; i < count; ++i) {
    const size_t t = count - 1 - i;  // backward produces the last layer first
    const ProfileTensor& tensor = m.profile.tensors[t];
    kolo_status_t s = kolo_allreduce_async(tensor.name.c_str(), m.in(t), m.out(t), tensor.elements,
                                           dtype, KOLO_OP_AVERAGE, 1.0, 1.0, device, &(*handles)[i]);
    if (s != KOLO_OK) abort_job(m.comm, "kolo_allreduce_async", kolo_last_error());
  }
  for (kolo_handle_t& h : *handles) {
    if (kolo_wait(h, -1.0) != KOLO_OK) abort_job(m.comm, "kolo_wait", kolo_handle_message(h));
    kolo_handle_release(h);
    h = nullptr;
  }
}

// With --timeline, the fused variant's last timed step is recorded (kolo's timeline
// started and stopped around it, at run time).
VariantResult run_kolo_variant(ModelRun* m, const std::string& name, const std::string& threshold) {
  start_kolo(m->comm, m->options.transport, threshold);
  std::vector<kolo_handle_t> handles(m->profile.tensors.size());
  const std::string& timeline = m->options.timeline_path;
  const bool record = !timeline.empty() && name == "kolo_fused";
  int steps_left = m->options.warmup_iters + m->options.iters;
  VariantResult r = time_steps(m, name, [&] {
    const bool last = --steps_left == 0;
    if (record && last && kolo_timeline_start(timeline.c_str(), 1) != KOLO_OK)
      abort_job(m->comm, "kolo_timeline_start", kolo_last_error());
    kolo_step(*m, &handles);
    if (record && last && kolo_timeline_stop() != KOLO_OK)
      abort_job(m->comm, "kolo_timeline_stop", kolo_last_error());
  });
  stop_kolo(m->comm);
  return r;
}

// The knobs autotune tunes (core/autotune.h).
const char* const kTunedKnobs[] = {"KOLO_FUSION_THRESHOLD",   "KOLO_LARGE_TENSOR_BYTES",
                                   "KOLO_SHM_SLICE_BYTES",    "KOLO_RING_SEGMENT_BYTES",
                                   "KOLO_TRANSPORT_SMALL",    "KOLO_TRANSPORT_LARGE",
                                   "KOLO_HIERARCHICAL_ALLREDUCE"};

VariantResult run_kolo_defaults(ModelRun* m) {
  std::vector<std::pair<const char*, std::string>> saved;
  for (const char* k : kTunedKnobs) {
    if (const char* v = std::getenv(k)) saved.emplace_back(k, v);
    unsetenv(k);
  }
  VariantResult r = run_kolo_variant(m, "kolo_defaults", "-");
  for (const auto& [k, v] : saved) setenv(k, v.c_str(), 1);
  return r;
}

// Note [Timing autotune]
// Tuning runs on real steps, so the tuning steps are the workload; they are not
// timed (the search visits bad settings on purpose). Once every rank reports the
// frozen setting (kolo_autotune_state; the ranks agree on the step, as they apply
// it at the same cycle, and a MIN over ranks makes sure), the frozen setting is
// timed like any variant. How many steps and seconds the tuning took is printed.
VariantResult run_kolo_autotuned(ModelRun* m, int* tuning_steps, double* tuning_s) {
  setenv("KOLO_AUTOTUNE", "1", 1);
  start_kolo(m->comm, m->options.transport, "");
  std::vector<kolo_handle_t> handles(m->profile.tensors.size());
  const double start = now_seconds();
  int frozen_everywhere = 0;
  for (*tuning_steps = 0; !frozen_everywhere && *tuning_steps < 100000; ++*tuning_steps) {
    if (m->options.check || m->options.in_place) poison_output(*m);
    kolo_step(*m, &handles);
    if (m->options.check && wrong_in_output(*m) != 0) abort_job(m->comm, "autotune", "wrong result");
    int frozen = 0;
    if (kolo_autotune_state(&frozen, nullptr, nullptr) != KOLO_OK)
      abort_job(m->comm, "kolo_autotune_state", kolo_last_error());
    MPI_Allreduce(&frozen, &frozen_everywhere, 1, MPI_INT, MPI_MIN, m->comm);
  }
  *tuning_s = now_seconds() - start;
  VariantResult r = time_steps(m, "kolo_autotuned", [&] { kolo_step(*m, &handles); });
  stop_kolo(m->comm);
  unsetenv("KOLO_AUTOTUNE");
  return r;
}

VariantResult run_mpi_per_tensor(ModelRun* m, const MpiReference& ref) {
  return time_steps(m, "mpi_per_tensor", [&] {
    for (size_t t = m->profile.tensors.size(); t-- > 0;) {
      ref.allreduce(m->in(t), m->out(t), m->profile.tensors[t].elements);
    }
  });
}

VariantResult run_mpi_concat(ModelRun* m) {
  MpiReference sum(m->comm, m->profile.dtype, ReduceOp::kSum);
  const DataType dtype = m->profile.dtype;
  const double factor = 1.0 / m->world_size;
  return time_steps(m, "mpi_concat", [&] {
    char* flat = m->concat.data();
    const size_t count = m->profile.tensors.size();
    for (size_t t = count; t-- > 0;) {
      std::memcpy(flat + m->offsets[t] * m->elem(), m->in(t),
                  static_cast<size_t>(m->profile.tensors[t].elements) * m->elem());
    }
    sum.allreduce(flat, flat, m->profile.total_elements);
    for (size_t t = count; t-- > 0;) {
      reduce::copy_scaled(m->out(t), flat + m->offsets[t] * m->elem(),
                          m->profile.tensors[t].elements, dtype, factor);
    }
  });
}

VariantResult run_nccl_per_tensor(ModelRun* m, NcclReference* ref) {
  return time_steps(m, "nccl_per_tensor", [&] {
    for (size_t t = m->profile.tensors.size(); t-- > 0;) {
      ref->enqueue_allreduce(m->in(t), m->out(t), m->profile.tensors[t].elements);
    }
    ref->synchronize();
  });
}

VariantResult run_nccl_concat(ModelRun* m, NcclReference* ref) {
  return time_steps(m, "nccl_concat", [&] {
    char* flat = m->concat_arena();
    auto bytes = [m](size_t t) {
      return static_cast<size_t>(m->profile.tensors[t].elements) * m->elem();
    };
    for (size_t t = m->profile.tensors.size(); t-- > 0;) {
      ref->enqueue_copy(flat + m->offsets[t] * m->elem(), m->in(t), bytes(t));
    }
    ref->enqueue_allreduce(flat, flat, m->profile.total_elements);
    for (size_t t = m->profile.tensors.size(); t-- > 0;) {
      ref->enqueue_copy(m->out(t), flat + m->offsets[t] * m->elem(), bytes(t));
    }
    ref->synchronize();
  });
}

std::string threshold_label() {
  const char* env = std::getenv("KOLO_FUSION_THRESHOLD");
  return env != nullptr && *env != '\0' ? std::string(env) + " (KOLO_FUSION_THRESHOLD)"
                                        : std::string("64M (default)");
}

void print_rows(const ModelRun& m, const std::vector<VariantResult>& rows,
                const std::string& threshold) {
  const PerfOptions& o = m.options;
  const Profile& p = m.profile;
  double best_ref = 0;
  for (const VariantResult& r : rows)
    if (r.name.rfind("kolo", 0) != 0 && (best_ref == 0 || r.step_s < best_ref)) best_ref = r.step_s;
  const std::string speedup_column = std::string("speedup_vs_") + m.reference_kind();
  std::printf(
      "# kolo-allreduce-perf (kolo %s): model %s: %zu tensors, %lld %s, %lld bytes; "
      "op avg; nranks %d; transport %s%s%s\n",
      kolo_version(), p.name.c_str(), p.tensors.size(), static_cast<long long>(p.total_elements),
      dtype_name(p.dtype).c_str(), static_cast<long long>(p.total_bytes()), m.world_size,
      effective_transport().c_str(), o.in_place ? "; in place" : "",
      o.kolo_memory ? "; arenas from kolo_alloc" : "");
  if (m.device != nullptr) {
    std::printf("#  device buffers on %s (rank 0); references: NCCL on its own comm and stream\n",
                m.device->describe().c_str());
  }
  std::printf("#  warmup steps: %d steps: %d validation: %d fusion threshold: %s\n", o.warmup_iters,
              o.iters, o.check ? 1 : 0, threshold.c_str());
  std::printf(
      "#  step_ms: median over steps of the slowest rank; effective_GBps = bytes / step "
      "(GB = 1e9 B); %s = faster %s variant / this\n#\n",
      speedup_column.c_str(), m.device ? "NCCL" : "MPI");
  std::printf("# %-14s %7s %12s %10s %14s %14s %7s\n", "variant", "tensors", "bytes", "step_ms",
              "effective_GBps", speedup_column.c_str(), "#wrong");
  std::unique_ptr<CsvWriter> csv;
  if (!o.csv_path.empty()) {
    csv = std::make_unique<CsvWriter>(
        o.csv_path,
        std::vector<std::string>{"variant", "tensors", "bytes", "step_ms", "effective_GBps",
                                 speedup_column, "wrong", "nranks", "transport"});
    if (!csv->ok())
      std::fprintf(stderr, "kolo-allreduce-perf: cannot write %s\n", o.csv_path.c_str());
  }
  for (const VariantResult& r : rows) {
    const double gbps = gb_per_second(static_cast<double>(p.total_bytes()), r.step_s);
    const double speedup = r.step_s > 0 ? best_ref / r.step_s : 0.0;
    std::printf("  %-14s %7zu %12lld %10.3f %14.3f %14.2f %7lld\n", r.name.c_str(),
                p.tensors.size(), static_cast<long long>(p.total_bytes()), r.step_s * 1e3, gbps,
                speedup, static_cast<long long>(r.wrong));
    if (csv && csv->ok()) {
      csv->row({r.name, std::to_string(p.tensors.size()), std::to_string(p.total_bytes()),
                format("%.4f", r.step_s * 1e3), format("%.6f", gbps), format("%.4f", speedup),
                std::to_string(r.wrong), std::to_string(m.world_size), effective_transport()});
    }
  }
  std::fflush(stdout);
}

// The two reference variants: MPI on host arenas, NCCL on device arenas.
void run_references(ModelRun* m, std::vector<VariantResult>* rows) {
  if (m->device == nullptr) {
    MpiReference average(m->comm, m->profile.dtype, kOp);
    rows->push_back(run_mpi_per_tensor(m, average));
    rows->push_back(run_mpi_concat(m));
    return;
  }
  std::unique_ptr<NcclReference> nccl = m->device->nccl_reference(m->comm, m->profile.dtype, kOp);
  rows->push_back(run_nccl_per_tensor(m, nccl.get()));
  rows->push_back(run_nccl_concat(m, nccl.get()));
}

}  // namespace

int run_model(MPI_Comm comm, const PerfOptions& options, CudaDevice* device) {
  ModelRun m{comm, options, {}, {}, {}, {}, {}, {}, 0, 1, device, {}, {}, {}, {}};
  MPI_Comm_rank(comm, &m.rank);
  MPI_Comm_size(comm, &m.world_size);
  std::string error;
  if (!load_profile(options.model, &m.profile, &error)) {
    if (m.rank == 0) std::fprintf(stderr, "kolo-allreduce-perf: %s\n", error.c_str());
    return 2;
  }
  prepare(&m);
  const std::string threshold = threshold_label();  // before kolo_unfused sets it to 0
  std::vector<VariantResult> rows;
  rows.push_back(run_kolo_variant(&m, "kolo_fused", ""));
  int tuning_steps = 0;
  double tuning_s = 0;
  if (options.autotune) {
    rows.push_back(run_kolo_defaults(&m));
    rows.push_back(run_kolo_autotuned(&m, &tuning_steps, &tuning_s));
  } else {
    rows.push_back(run_kolo_variant(&m, "kolo_unfused", "0"));
  }
  run_references(&m, &rows);
  // MPI's results equal kolo's bit for bit, NCCL's average may not (see perf_cuda.h):
  // on the device a reference mismatch is reported, not failed.
  int64_t wrong = 0, ref_wrong = 0;
  for (const VariantResult& r : rows) (r.name.rfind("kolo", 0) == 0 ? wrong : ref_wrong) += r.wrong;
  if (device == nullptr) wrong += ref_wrong;
  if (m.rank == 0) {
    if (options.autotune) {
      std::printf("# autotune: every rank applied the frozen setting after %d steps (%.1f s of "
                  "tuning; rank 0's KOLO_AUTOTUNE_LOG has the samples)\n",
                  tuning_steps, tuning_s);
    }
    print_rows(m, rows, threshold);
    if (options.check) {
      std::printf("# Wrong elements (%s, steps and ranks): %lld %s\n",
                  device ? "kolo variants" : "all variants", static_cast<long long>(wrong),
                  wrong == 0 ? "OK" : "FAILED");
      if (device != nullptr && ref_wrong != 0) {
        std::printf("# NCCL reference wrong elements: %lld\n", static_cast<long long>(ref_wrong));
      }
    }
  }
  return wrong == 0 ? 0 : 1;
}

}  // namespace kolo::bench
