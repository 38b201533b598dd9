// Command-line options of kolo-allreduce-perf, in nccl-tests' spelling.
//
//   -b/--minbytes SIZE   -e/--maxbytes SIZE   -f/--stepfactor F (2)
//   -n/--iters N (20)    -w/--warmup_iters N (5)   --warmup_ms T (100)   -c/--check 0|1 (1)
//   -d/--datatype NAME (float32)   -o/--op sum|avg|min|max|prod (sum)
//   -t/--transport NAME (auto)     -r/--reference mpi|nccl|none
//   -m/--model PROFILE [--autotune] --csv FILE      -h/--help
//   --timeline PATH (with -m: the last kolo_fused step's timeline)
//   --collective allreduce|allgather|broadcast|alltoall|reducescatter (allreduce)
//   --process-set RANKS (e.g. 0,2: the sweep runs in that process set; the others wait)
//   --tensors N (1: N tensors per timed operation, submitted together; perf_tensors.h)
// SIZE takes K, M, G suffixes (powers of 1024), as kolo's byte knobs do.
// -t nccl also moves the data to the GPU: device buffers (see perf_cuda.h), compared
// with ncclAllReduce (-r nccl) instead of MPI.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/dtype.h"

namespace kolo::bench {

// The collective a size sweep times (nccl-tests has one program per collective).
enum class Collective { kAllreduce, kAllgather, kBroadcast, kAlltoall, kReducescatter };

// What a sweep times beside kolo (-r): nothing, the matching MPI call on the same
// host buffers, or ncclAllReduce on the same device buffers.
enum class Reference { kNone, kMpi, kNccl };

struct PerfOptions {
  Collective collective = Collective::kAllreduce;
  int64_t min_bytes = 32 << 20;
  int64_t max_bytes = 32 << 20;
  int64_t step_factor = 2;
  int iters = 20;
  int warmup_iters = 5;
  // A sweep's sizes warm up for at least this long too (Note [Warming up by time]).
  int64_t warmup_ms = 100;
  bool check = true;
  DataType dtype = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  bool op_given = false;  // -o was on the command line
  std::string transport;  // empty: leave KOLO_TRANSPORT as the environment has it
  Reference reference = Reference::kNone;
  std::string model;     // empty: the size sweep
  std::string csv_path;  // empty: no CSV
  bool kolo_memory = false;  // --memory kolo: the buffers from kolo_alloc
  bool blocking = false;     // --blocking: the blocking calls instead of async + wait
  bool into = false;         // --into: the allgather into a persistent buffer (kolo_allgather_into)
  bool in_place = false;     // --in-place: the allreduce's output is its input
  std::string timeline_path;  // empty: no timeline of a model step
  std::vector<int> process_set;  // empty: the global set
  int tensors = 1;               // --tensors: tensors per timed operation (perf_tensors.h)
  bool help = false;
  bool breakdown = false;  // --breakdown: per-phase medians after each size (perf_breakdown.h)
  bool autotune = false;  // --model with KOLO_AUTOTUNE=1: tune, then time the frozen setting
  // --with-deterministic: each kolo allreduce iteration is followed by one with
  // KOLO_OPTION_DETERMINISTIC (docs/deterministic.md), timed and checked alike.
  bool with_deterministic = false;
};

// Parses argv. Returns false and sets *error on an unknown flag, a missing or
// malformed value, or inconsistent values (min > max, factor < 2, avg on bool, -o
// for a collective without an op, reducescatter with an op other than sum/avg, ...).
bool parse_perf_options(int argc, char** argv, PerfOptions* options, std::string* error);

const char* perf_usage();

// Whether the buffers live on a CUDA device: -t nccl.
bool uses_device(const PerfOptions& options);

// "none", "mpi", "nccl".
const char* reference_name(Reference reference);

// "sum", "avg", "min", "max", "prod": nccl-tests' names for the ops.
const char* redop_name(ReduceOp op);

// "allreduce", "allgather", "broadcast", "alltoall", "reducescatter".
const char* collective_name(Collective collective);

// Whether the collective reduces (takes -o): allreduce and reducescatter.
bool collective_reduces(Collective collective);

}  // namespace kolo::bench
