#include "bench/perf_options.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>

#include "common/knobs.h"

namespace kolo::bench {
namespace {

bool parse_int(const std::string& text, int64_t min_value, int64_t* out) {
  if (text.empty()) return false;
  char* end = nullptr;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (*end != '\0' || v < min_value) return false;
  *out = v;
  return true;
}

bool parse_redop(const std::string& text, ReduceOp* op) {
  static const std::map<std::string, ReduceOp> kOps = {
      {"sum", ReduceOp::kSum},        {"avg", ReduceOp::kAverage}, {"average", ReduceOp::kAverage},
      {"min", ReduceOp::kMin},        {"max", ReduceOp::kMax},     {"prod", ReduceOp::kProduct},
      {"product", ReduceOp::kProduct}};
  auto it = kOps.find(text);
  if (it == kOps.end()) return false;
  *op = it->second;
  return true;
}

bool parse_collective(const std::string& text, Collective* c) {
  for (Collective candidate : {Collective::kAllreduce, Collective::kAllgather,
                               Collective::kBroadcast, Collective::kAlltoall,
                               Collective::kReducescatter}) {
    if (text == collective_name(candidate)) {
      *c = candidate;
      return true;
    }
  }
  return false;
}

// "0,2" -> {0, 2}: non-negative ranks, at least one. (kolo_process_set_add checks
// the rest: range, duplicates, every rank passing the same list.)
bool parse_ranks(const std::string& v, std::vector<int>* ranks) {
  ranks->clear();
  size_t start = 0;
  while (start <= v.size()) {
    const size_t comma = std::min(v.find(',', start), v.size());
    int64_t r = 0;
    if (!parse_int(v.substr(start, comma - start), 0, &r) || r > 1 << 20) return false;
    ranks->push_back(static_cast<int>(r));
    start = comma + 1;
  }
  return !ranks->empty();
}

// One flag: its names and what to do with its value.
struct Flag {
  const char* short_name;
  const char* long_name;
  std::function<bool(const std::string&, PerfOptions*)> apply;
  const char* expected;  // for the error message
};

const std::vector<Flag>& flags() {
  static const std::vector<Flag> kFlags = {
      {"-b", "--minbytes",
       [](const std::string& v, PerfOptions* o) {
         return parse_bytes(v, &o->min_bytes) && o->min_bytes > 0;
       },
       "a size > 0, e.g. 8, 64K, 1M"},
      {"-e", "--maxbytes",
       [](const std::string& v, PerfOptions* o) {
         return parse_bytes(v, &o->max_bytes) && o->max_bytes > 0;
       },
       "a size > 0, e.g. 8, 64K, 1M"},
      {"-f", "--stepfactor",
       [](const std::string& v, PerfOptions* o) { return parse_int(v, 2, &o->step_factor); },
       "an integer >= 2"},
      {"-n", "--iters",
       [](const std::string& v, PerfOptions* o) {
         int64_t n;
         if (!parse_int(v, 1, &n) || n > 1000000) return false;
         o->iters = static_cast<int>(n);
         return true;
       },
       "an integer in 1..1000000"},
      {"-w", "--warmup_iters",
       [](const std::string& v, PerfOptions* o) {
         int64_t n;
         if (!parse_int(v, 0, &n) || n > 1000000) return false;
         o->warmup_iters = static_cast<int>(n);
         return true;
       },
       "an integer in 0..1000000"},
      {nullptr, "--warmup_ms",
       [](const std::string& v, PerfOptions* o) {
         return parse_int(v, 0, &o->warmup_ms) && o->warmup_ms <= 60000;
       },
       "an integer in 0..60000"},
      {"-c", "--check",
       [](const std::string& v, PerfOptions* o) { return parse_bool(v, &o->check); }, "0 or 1"},
      {"-d", "--datatype",
       [](const std::string& v, PerfOptions* o) { return parse_dtype(v, &o->dtype); },
       "a kolo dtype: uint8 int8 uint16 int16 int32 int64 float16 bfloat16 float32 float64 bool"},
      {"-o", "--op",
       [](const std::string& v, PerfOptions* o) {
         o->op_given = true;
         return parse_redop(v, &o->op);
       },
       "sum, avg, min, max or prod"},
      {nullptr, "--collective",
       [](const std::string& v, PerfOptions* o) { return parse_collective(v, &o->collective); },
       "allreduce, allgather, broadcast, alltoall or reducescatter"},
      {"-t", "--transport",
       [](const std::string& v, PerfOptions* o) {
         o->transport = v;
         return !v.empty();
       },
       "auto or a transport name (kolo-info lists them)"},
      {"-r", "--reference",
       [](const std::string& v, PerfOptions* o) {
         for (Reference r : {Reference::kNone, Reference::kMpi, Reference::kNccl}) {
           if (v == reference_name(r)) o->reference = r;
         }
         return v == reference_name(o->reference);
       },
       "mpi, nccl or none"},
      {"-m", "--model",
       [](const std::string& v, PerfOptions* o) {
         o->model = v;
         return !v.empty();
       },
       "a profile name (resnet50) or a profile file"},
      {nullptr, "--process-set",
       [](const std::string& v, PerfOptions* o) { return parse_ranks(v, &o->process_set); },
       "global ranks separated by commas, e.g. 0,2"},
      {nullptr, "--tensors",
       [](const std::string& v, PerfOptions* o) {
         int64_t n;
         if (!parse_int(v, 1, &n) || n > 4096) return false;
         o->tensors = static_cast<int>(n);
         return true;
       },
       "an integer in 1..4096"},
      {nullptr, "--memory",
       [](const std::string& v, PerfOptions* o) {
         o->kolo_memory = v == "kolo";
         return v == "kolo" || v == "heap";
       },
       "heap (the default) or kolo (kolo_alloc: peers on the node read it in place)"},
      {nullptr, "--csv",
       [](const std::string& v, PerfOptions* o) {
         o->csv_path = v;
         return !v.empty();
       },
       "a file name"},
      {nullptr, "--timeline",
       [](const std::string& v, PerfOptions* o) {
         o->timeline_path = v;
         return !v.empty();
       },
       "a timeline path (with %r, or a directory, for every rank's file)"},
  };
  return kFlags;
}

const Flag* find_flag(const std::string& name) {
  for (const Flag& f : flags()) {
    if ((f.short_name && name == f.short_name) || name == f.long_name) return &f;
  }
  return nullptr;
}

// -t nccl: device buffers, allreduce only, NCCL's dtypes, the NCCL reference.
bool check_device_consistency(const PerfOptions& o, std::string* error) {
  if (!uses_device(o)) {
    if (o.reference == Reference::kNccl) {
      *error = "-r nccl times ncclAllReduce on device buffers: it needs -t nccl";
      return false;
    }
    return true;
  }
  if (o.collective != Collective::kAllreduce) {
    *error = std::string("-t nccl (device buffers) times allreduce only, not ") +
             collective_name(o.collective);
    return false;
  }
  if (o.dtype == DataType::kUint16 || o.dtype == DataType::kInt16) {
    *error = "-t nccl: NCCL has no " + dtype_name(o.dtype) + " (kolo refuses it on CUDA tensors)";
    return false;
  }
  if (o.reference == Reference::kMpi) {
    *error =
        "-r mpi times MPI_Allreduce on host buffers; with -t nccl (device buffers) use -r nccl";
    return false;
  }
  return true;
}

bool check_consistency(const PerfOptions& o, std::string* error) {
  if (o.min_bytes > o.max_bytes) {
    *error = "--minbytes must not exceed --maxbytes";
    return false;
  }
  if (o.dtype == DataType::kBool && o.op == ReduceOp::kAverage) {
    *error = "avg is not defined on bool";
    return false;
  }
  if (o.op_given && !collective_reduces(o.collective)) {
    *error = std::string("-o applies to allreduce and reducescatter, not ") +
             collective_name(o.collective);
    return false;
  }
  if (o.collective == Collective::kReducescatter && o.op != ReduceOp::kSum &&
      o.op != ReduceOp::kAverage) {
    *error = "reducescatter takes -o sum or avg (as kolo_reducescatter_async does)";
    return false;
  }
  if (!o.model.empty() && o.collective != Collective::kAllreduce) {
    *error = "--model times allreduces; it takes no --collective";
    return false;
  }
  if (o.breakdown && (!o.model.empty() || o.tensors > 1 || uses_device(o))) {
    *error = "--breakdown times one host operation at a time in the size sweep (not with "
             "--model, --tensors or -t nccl)";
    return false;
  }
  if (o.autotune && o.model.empty()) {
    *error = "--autotune tunes a training step: it needs --model";
    return false;
  }
  if (!o.model.empty() && o.reference != Reference::kNone) {
    *error =
        "--model always compares with MPI (with NCCL under -t nccl); -r applies to the size "
        "sweep only";
    return false;
  }
  if (!o.model.empty() && !o.process_set.empty()) {
    *error = "--process-set applies to the size sweep, not --model";
    return false;
  }
  if (o.tensors > 1 && (!o.model.empty() || !o.process_set.empty() || uses_device(o) ||
                        o.collective == Collective::kAlltoall ||
                        o.collective == Collective::kReducescatter)) {
    *error =
        "--tensors times allreduce, allgather or broadcast on host buffers in the size sweep "
        "(not with --model, --process-set or -t nccl)";
    return false;
  }
  return check_device_consistency(o, error);
}

}  // namespace

bool parse_perf_options(int argc, char** argv, PerfOptions* options, std::string* error) {
  PerfOptions o;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      o.help = true;
      continue;
    }
    if (arg == "--breakdown") {
      o.breakdown = true;
      continue;
    }
    if (arg == "--with-deterministic") {
      o.with_deterministic = true;
      continue;
    }
    if (arg == "--in-place") {
      o.in_place = true;
      continue;
    }
    if (arg == "--blocking") {
      o.blocking = true;
      continue;
    }
    if (arg == "--into") {
      o.into = true;
      continue;
    }
    if (arg == "--autotune") {
      o.autotune = true;
      continue;
    }
    std::string value;
    bool has_value = false;
    size_t eq = arg.find('=');
    if (arg.rfind("--", 0) == 0 && eq != std::string::npos) {  // --iters=5
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      has_value = true;
    }
    const Flag* flag = find_flag(arg);
    if (flag == nullptr) {
      *error = "unknown option '" + arg + "' (see --help)";
      return false;
    }
    if (!has_value) {
      if (i + 1 >= argc) {
        *error = arg + " needs a value: " + flag->expected;
        return false;
      }
      value = argv[++i];
    }
    if (!flag->apply(value, &o)) {
      *error = arg + " " + value + ": expected " + flag->expected;
      return false;
    }
  }
  if (!check_consistency(o, error)) return false;
  if (o.in_place &&
      (o.collective != Collective::kAllreduce || uses_device(o) || o.with_deterministic)) {
    *error = "--in-place: host allreduces only (the sweep or -m; no -t nccl, no --with-deterministic)";
    return false;
  }
  if (o.into && (o.collective != Collective::kAllgather || !o.model.empty() || o.tensors > 1)) {
    *error = "--into: the allgather sweep of one tensor at a time only";
    return false;
  }
  if (o.blocking && (!o.model.empty() || o.breakdown || o.tensors > 1)) {
    *error = "--blocking: the sweep of one tensor at a time only (no -m, no --breakdown, no "
             "--tensors)";
    return false;
  }
  if (o.with_deterministic &&
      (o.collective != Collective::kAllreduce || !o.model.empty() || uses_device(o))) {
    *error = "--with-deterministic: the host allreduce sweep only (no -m, no -t nccl)";
    return false;
  }
  *options = o;
  return true;
}

const char* perf_usage() {
  return "usage: mpiexec -n N kolo-allreduce-perf [options]\n"
         "  -b, --minbytes SIZE      smallest message (default 32M; K, M, G suffixes)\n"
         "  -e, --maxbytes SIZE      largest message (default 32M)\n"
         "  -f, --stepfactor F       multiply the size by F each step (default 2)\n"
         "  -n, --iters N            timed iterations per size (default 20)\n"
         "  -w, --warmup_iters N     untimed iterations first (default 5)\n"
         "      --warmup_ms T        and, in a size sweep, untimed iterations until T ms\n"
         "                           have passed (default 100; 0: -w alone)\n"
         "  -c, --check 0|1          verify every result, count wrong elements (default 1)\n"
         "  -d, --datatype NAME      kolo dtype (default float32)\n"
         "  -o, --op OP              sum|avg|min|max|prod (default sum); allreduce, and\n"
         "                           reducescatter (sum|avg) only\n"
         "      --collective NAME    allreduce (default), allgather, broadcast (root 0),\n"
         "                           alltoall or reducescatter\n"
         "  -t, --transport NAME     sets KOLO_TRANSPORT before kolo_init (default auto);\n"
         "                           -t nccl also puts the buffers on the GPU (cudaMalloc on\n"
         "                           local rank % visible devices; allreduce only)\n"
         "  -r, --reference mpi      also time the matching MPI call (MPI_Allreduce,\n"
         "                           MPI_Allgather, MPI_Bcast, MPI_Alltoall,\n"
         "                           MPI_Reduce_scatter_block), interleaved, and print the ratio\n"
         "  -r, --reference nccl     with -t nccl: ncclAllReduce on the same device buffers\n"
         "                           (own communicator and stream), interleaved\n"
         "  -m, --model PROFILE      time a training step's gradient set (e.g. resnet50):\n"
         "                           kolo fused, kolo unfused, MPI per tensor, MPI concatenated\n"
         "                           (-t nccl: on the GPU, NCCL per tensor, NCCL concatenated)\n"
         "      --autotune           with -m: also run with KOLO_AUTOTUNE=1 until the search\n"
         "                           freezes, then time the frozen setting (kolo_autotuned), and\n"
         "                           kolo with every tuned knob at its default (kolo_defaults)\n"
         "      --with-deterministic allreduce sweep: after each kolo iteration one with\n"
         "                           KOLO_OPTION_DETERMINISTIC (rank order), interleaved;\n"
         "                           prints det_time_us and det/kolo\n"
         "      --breakdown          after each size, every rank's median time in each phase of\n"
         "                           an operation (submit, to_cycle, negotiate, to_transport,\n"
         "                           transport, to_complete, wake; kolo_handle_phases)\n"
         "      --in-place           allreduce sweep or -m: the output is the input (MPI:\n"
         "                           MPI_IN_PLACE), refilled from the input before each op or\n"
         "                           step (not timed)\n"
         "      --blocking           the sweep's kolo calls are the blocking ones\n"
         "                           (kolo_allreduce_ex, kolo_allgather_ex, ...) instead of\n"
         "                           the asynchronous call and kolo_wait\n"
         "      --into               allgather sweep: kolo gathers into a persistent buffer\n"
         "                           (kolo_allgather_into[_async_ex]), as MPI does, instead\n"
         "                           of the output kolo hands in the handle\n"
         "      --memory kolo        the sweep's kolo buffers (-m: both arenas) from kolo_alloc\n"
         "                           (peers on a node read them in place); default heap\n"
         "      --csv FILE           also write the rows as CSV\n"
         "      --timeline PATH      with -m: record the last timed kolo_fused step with\n"
         "                           kolo_timeline_start(PATH, 1) / kolo_timeline_stop()\n"
         "      --process-set RANKS  run the sweep in the process set of these global ranks\n"
         "                           (e.g. 0,2); ranks outside it wait (busbw uses the set's\n"
         "                           size)\n"
         "      --tensors N          N tensors of each size per timed operation, submitted\n"
         "                           together then waited for (fusion's case); -r mpi: N\n"
         "                           blocking MPI calls. algbw counts all N. allreduce,\n"
         "                           allgather, broadcast\n"
         "Every operation goes through kolo_<collective>_async + kolo_wait (or --blocking). time = median\n"
         "over iterations of the maximum over ranks; GB = 1e9 bytes. size, count, algbw and\n"
         "busbw follow nccl-tests: size is the larger of a rank's input and output, algbw =\n"
         "size / time, busbw = algbw * 2(n-1)/n (allreduce), (n-1)/n (allgather, alltoall,\n"
         "reducescatter) or 1 (broadcast).\n";
}

bool uses_device(const PerfOptions& options) { return options.transport == "nccl"; }

const char* reference_name(Reference reference) {
  switch (reference) {
    case Reference::kNone:
      return "none";
    case Reference::kMpi:
      return "mpi";
    case Reference::kNccl:
      return "nccl";
  }
  return "?";
}

const char* redop_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kAverage:
      return "avg";
    case ReduceOp::kMin:
      return "min";
    case ReduceOp::kMax:
      return "max";
    case ReduceOp::kProduct:
      return "prod";
    case ReduceOp::kAdasum:
      return "adasum";
  }
  return "?";
}

const char* collective_name(Collective collective) {
  switch (collective) {
    case Collective::kAllreduce:
      return "allreduce";
    case Collective::kAllgather:
      return "allgather";
    case Collective::kBroadcast:
      return "broadcast";
    case Collective::kAlltoall:
      return "alltoall";
    case Collective::kReducescatter:
      return "reducescatter";
  }
  return "?";
}

bool collective_reduces(Collective collective) {
  return collective == Collective::kAllreduce || collective == Collective::kReducescatter;
}

}  // namespace kolo::bench
