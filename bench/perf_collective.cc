#include "bench/perf_collective.h"

#include <algorithm>
#include <cstring>

#include "bench/perf_data.h"
#include "bench/perf_kolo.h"
#include "bench/perf_report.h"

namespace kolo::bench {

CollectiveShape collective_shape(Collective collective, int64_t bytes, size_t elem, int n) {
  const int64_t c = std::max<int64_t>(1, bytes / static_cast<int64_t>(elem));
  const int64_t per_rank = std::max<int64_t>(1, c / n);
  CollectiveShape s;
  switch (collective) {
    case Collective::kAllreduce:
    case Collective::kBroadcast:
      s.count = s.input = s.output = c;
      break;
    case Collective::kAllgather:
      s.count = s.input = per_rank;
      s.output = per_rank * n;
      break;
    case Collective::kAlltoall:
      s.count = per_rank;
      s.input = s.output = per_rank * n;
      break;
    case Collective::kReducescatter:
      s.count = s.output = per_rank;
      s.input = per_rank * n;
      break;
  }
  return s;
}

// nccl-tests doc/PERFORMANCE.md, "Summary": AllReduce 2(n-1)/n; ReduceScatter,
// AllGather and AlltoAll (n-1)/n; Broadcast 1 (all data leaves the root, whose link is
// the bottleneck).
double bus_factor(Collective collective, int n) {
  if (n <= 0) return 0.0;
  switch (collective) {
    case Collective::kAllreduce:
      return 2.0 * (n - 1) / n;
    case Collective::kBroadcast:
      return 1.0;
    case Collective::kAllgather:
    case Collective::kAlltoall:
    case Collective::kReducescatter:
      return static_cast<double>(n - 1) / n;
  }
  return 0.0;
}

const char* bus_factor_text(Collective collective) {
  switch (collective) {
    case Collective::kAllreduce:
      return "2(n-1)/n";
    case Collective::kBroadcast:
      return "1";
    default:
      return "(n-1)/n";
  }
}

CollectiveCase::CollectiveCase(MPI_Comm comm, const PerfOptions& options, int64_t max_bytes)
    : comm_(comm), options_(options), elem_(dtype_size(options.dtype)),
      reference_(comm, options.dtype, options.op) {
  MPI_Comm_rank(comm, &rank_);
  MPI_Comm_size(comm, &world_size_);
  const Collective c = options.collective;
  const CollectiveShape most = collective_shape(c, max_bytes, elem_, world_size_);
  // With --into the allgather writes into output_ (kolo_allgather_into).
  const bool kolo_owns_output =
      (c == Collective::kAllgather && !options.into) || c == Collective::kAlltoall;
  input_ = Buffer(static_cast<size_t>(most.input) * elem_, options.kolo_memory);
  if (!kolo_owns_output)
    output_ = Buffer(static_cast<size_t>(most.output) * elem_, options.kolo_memory);
  const bool reference = options.reference == Reference::kMpi;
  if (reference) ref_output_ = Buffer(static_cast<size_t>(most.output) * elem_);
  if (options.check) expected_ = Buffer(static_cast<size_t>(most.size()) * elem_);
  if (collective_reduces(c)) {
    fill_input(input_.data(), most.input, options.dtype, options.op, rank_);
    // Reducescatter's shard r is elements [r*count, (r+1)*count) of the allreduce.
    if (options.check) {
      fill_expected(expected_.data(), most.size(), options.dtype, options.op, world_size_);
    }
    return;
  }
  fill_sequence(input_.data(), most.input, options.dtype, sequence_start(rank_));
  if (c != Collective::kBroadcast) return;  // allgather, alltoall: see set_shape
  if (options.check) {
    fill_sequence(expected_.data(), most.output, options.dtype, sequence_start(kRoot));
  }
  if (rank_ == kRoot) {  // the root's data, in place (refreshed per iteration with -c 1)
    std::memcpy(output_.data(), input_.data(), input_.bytes());
    if (reference) std::memcpy(ref_output_.data(), input_.data(), input_.bytes());
  }
}

CollectiveShape CollectiveCase::shape_of(int64_t bytes) const {
  return collective_shape(options_.collective, bytes, elem_, world_size_);
}

void CollectiveCase::set_shape(const CollectiveShape& shape) {
  shape_ = shape;
  if (options_.check) fill_expected_for_shape();
}

// Allgather: block r is rank r's input. Alltoall: block s is the part of rank s's
// input addressed to this rank, elements [rank*count, (rank+1)*count) of it.
void CollectiveCase::fill_expected_for_shape() {
  const int64_t count = shape_.count;
  for (int r = 0; r < world_size_; ++r) {
    char* block = expected_.data() + static_cast<size_t>(r * count) * elem_;
    if (options_.collective == Collective::kAllgather) {
      fill_sequence(block, count, options_.dtype, sequence_start(r));
    } else if (options_.collective == Collective::kAlltoall) {
      fill_sequence(block, count, options_.dtype, sequence_start(r) + rank_ * count);
    }
  }
}

// Note [The root's preparation is not timed]
// A broadcast's root refills its buffer with the input before every iteration
// (its peers only poison theirs), so the root starts each timed call one copy of
// the buffer later than its peers, and a peer's time would count that copy (6-7 ms
// of a 12 ms median at 64 MiB, for kolo and MPI alike). With -c 1 a broadcast
// iteration therefore starts from an MPI_Barrier after the preparation.
//
// An --in-place allreduce refills its output with the input the same way (every
// rank, then the barrier): the op reduces its output.
void CollectiveCase::prepare_output(char* output) const {
  if (options_.in_place && output != nullptr) {
    std::memcpy(output, input_.data(), static_cast<size_t>(shape_.output) * elem_);
    MPI_Barrier(comm_);
    return;
  }
  if (!options_.check || output == nullptr) return;
  if (options_.collective != Collective::kBroadcast) {
    poison(output, shape_.output, options_.dtype);
    return;
  }
  if (rank_ == kRoot) {
    std::memcpy(output, input_.data(), static_cast<size_t>(shape_.output) * elem_);
  } else {
    poison(output, shape_.output, options_.dtype);
  }
  MPI_Barrier(comm_);
}

int64_t CollectiveCase::count_wrong_output(const char* output, int64_t bytes) const {
  if (bytes != shape_.output * static_cast<int64_t>(elem_)) return shape_.output;
  const char* expected = expected_.data();
  if (options_.collective == Collective::kReducescatter) {
    expected += static_cast<size_t>(rank_ * shape_.count) * elem_;
  }
  return count_wrong(output, expected, shape_.output, options_.dtype);
}

double CollectiveCase::run_kolo(const std::string& name, int64_t* wrong) {
  const CollectiveShape& s = shape_;
  const DataType dtype = options_.dtype;
  prepare_output(output_.data());
  CompletedHandle handle;
  const double start = now_seconds();
  switch (options_.collective) {
    case Collective::kAllreduce:
      kolo_allreduce(comm_, name, options_.in_place ? output_.data() : input_.data(),
                     output_.data(), s.count, dtype, options_.op);
      break;
    case Collective::kAllgather:
      handle = kolo_allgather(comm_, name, input_.data(), s.count, dtype,
                              options_.into ? output_.data() : nullptr);
      break;
    case Collective::kBroadcast:
      kolo_broadcast(comm_, name, output_.data(), s.count, dtype, kRoot);
      break;
    case Collective::kAlltoall:
      handle = kolo_alltoall(comm_, name, input_.data(), s.count, world_size_, dtype);
      break;
    case Collective::kReducescatter:
      kolo_reducescatter(comm_, name, input_.data(), output_.data(), s.count, world_size_, dtype,
                         options_.op);
      break;
  }
  const double seconds = now_seconds() - start;
  if (options_.check) {
    int64_t bytes = s.output * static_cast<int64_t>(elem_);
    const char* output = handle ? handle_output(handle, &bytes) : output_.data();
    *wrong += count_wrong_output(output, bytes);
  }
  return seconds;  // the handle (and a kolo-owned output) is released here
}

double CollectiveCase::run_reference(int64_t* wrong) {
  const CollectiveShape& s = shape_;
  char* out = ref_output_.data();
  prepare_output(out);
  const double start = now_seconds();
  switch (options_.collective) {
    case Collective::kAllreduce:
      reference_.allreduce(options_.in_place ? out : input_.data(), out, s.count);
      break;
    case Collective::kAllgather:
      reference_.allgather(input_.data(), out, s.count);
      break;
    case Collective::kBroadcast:
      reference_.broadcast(out, s.count, kRoot);
      break;
    case Collective::kAlltoall:
      reference_.alltoall(input_.data(), out, s.count);
      break;
    case Collective::kReducescatter:
      reference_.reduce_scatter(input_.data(), out, s.count);
      break;
  }
  const double seconds = now_seconds() - start;
  if (options_.check) *wrong += count_wrong_output(out, s.output * static_cast<int64_t>(elem_));
  return seconds;
}

}  // namespace kolo::bench
