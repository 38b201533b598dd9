#include "bench/perf_tensors.h"

#include <kolo/kolo.h>

#include <cstring>

#include "bench/perf_data.h"
#include "bench/perf_kolo.h"
#include "bench/perf_report.h"

namespace kolo::bench {

namespace {

constexpr kolo_device_t kCpu{KOLO_DEVICE_CPU, 0, nullptr};

}  // namespace

TensorsCase::TensorsCase(MPI_Comm comm, const PerfOptions& options, int64_t max_bytes)
    : comm_(comm), options_(options), elem_(dtype_size(options.dtype)),
      reference_(comm, options.dtype, options.op) {
  MPI_Comm_rank(comm, &rank_);
  MPI_Comm_size(comm, &world_size_);
  const Collective c = options.collective;
  const CollectiveShape most = collective_shape(c, max_bytes, elem_, world_size_);
  input_ = Buffer(static_cast<size_t>(most.input) * elem_);
  const size_t out_bytes = static_cast<size_t>(most.output) * elem_;
  for (int t = 0; t < options.tensors; ++t) {
    // kolo allocates allgather outputs (as users get them); MPI writes into these.
    if (c != Collective::kAllgather) outputs_.emplace_back(out_bytes);
    if (options.reference == Reference::kMpi) ref_outputs_.emplace_back(out_bytes);
  }
  handles_.resize(static_cast<size_t>(options.tensors));
  if (options.check) expected_ = Buffer(out_bytes);
  if (c == Collective::kAllreduce) {
    fill_input(input_.data(), most.input, options.dtype, options.op, rank_);
    if (options.check) fill_expected(expected_.data(), most.output, options.dtype, options.op, world_size_);
    return;
  }
  fill_sequence(input_.data(), most.input, options.dtype, sequence_start(rank_));
  // Broadcast in place: the root's outputs hold its data from the start.
  if (c == Collective::kBroadcast && rank_ == kRoot) {
    for (Buffer& b : outputs_) std::memcpy(b.data(), input_.data(), input_.bytes());
    for (Buffer& b : ref_outputs_) std::memcpy(b.data(), input_.data(), input_.bytes());
  }
  if (c == Collective::kBroadcast && options.check)
    fill_sequence(expected_.data(), most.output, options.dtype, sequence_start(kRoot));
}

CollectiveShape TensorsCase::shape_of(int64_t bytes) const {
  return collective_shape(options_.collective, bytes, elem_, world_size_);
}

void TensorsCase::set_shape(const CollectiveShape& shape) {
  shape_ = shape;
  if (!options_.check || options_.collective != Collective::kAllgather) return;
  for (int r = 0; r < world_size_; ++r)
    fill_sequence(expected_.data() + static_cast<size_t>(r * shape.count) * elem_, shape.count,
                  options_.dtype, sequence_start(r));
}

void TensorsCase::prepare(std::vector<Buffer>& outputs) const {
  if (!options_.check) return;
  for (Buffer& b : outputs) {
    poison(b.data(), shape_.output, options_.dtype);
    if (options_.collective == Collective::kBroadcast && rank_ == kRoot)
      std::memcpy(b.data(), input_.data(), static_cast<size_t>(shape_.output) * elem_);
  }
}

int64_t TensorsCase::count_wrong_in(const char* output, int64_t bytes) const {
  if (bytes != shape_.output * static_cast<int64_t>(elem_)) return shape_.output;
  return count_wrong(output, expected_.data(), shape_.output, options_.dtype);
}

double TensorsCase::run_kolo(const std::string& name, int64_t* wrong) {
  const Collective c = options_.collective;
  const auto dtype = static_cast<kolo_dtype_t>(options_.dtype);
  prepare(outputs_);
  const double start = now_seconds();
  for (size_t t = 0; t < handles_.size(); ++t) {
    const std::string tname = name + "." + std::to_string(t);
    kolo_status_t s = KOLO_OK;
    if (c == Collective::kAllreduce) {
      s = kolo_allreduce_async(tname.c_str(), input_.data(), outputs_[t].data(), shape_.count,
                               dtype, static_cast<kolo_op_t>(options_.op), 1.0, 1.0, kCpu,
                               &handles_[t]);
    } else if (c == Collective::kAllgather) {
      s = kolo_allgather_async(tname.c_str(), input_.data(), shape_.count, 1, dtype, kCpu,
                               &handles_[t]);
    } else {
      s = kolo_broadcast_async(tname.c_str(), outputs_[t].data(), outputs_[t].data(),
                               shape_.count, dtype, kRoot, kCpu, &handles_[t]);
    }
    if (s != KOLO_OK) abort_job(comm_, "--tensors: submit", kolo_last_error());
  }
  for (kolo_handle_t h : handles_)
    if (kolo_wait(h, -1.0) != KOLO_OK) abort_job(comm_, "--tensors: kolo_wait", kolo_handle_message(h));
  const double seconds = now_seconds() - start;
  for (size_t t = 0; t < handles_.size(); ++t) {
    if (options_.check) {
      int64_t bytes = shape_.output * static_cast<int64_t>(elem_);
      const void* data = outputs_.empty() ? nullptr : outputs_[t].data();
      if (c == Collective::kAllgather && kolo_handle_output(handles_[t], &data, &bytes) != KOLO_OK)
        bytes = -1;
      *wrong += count_wrong_in(static_cast<const char*>(data), bytes);
    }
    kolo_handle_release(handles_[t]);
  }
  return seconds;
}

double TensorsCase::run_reference(int64_t* wrong) {
  prepare(ref_outputs_);
  const double start = now_seconds();
  for (Buffer& out : ref_outputs_) {
    switch (options_.collective) {
      case Collective::kAllreduce: reference_.allreduce(input_.data(), out.data(), shape_.count); break;
      case Collective::kAllgather: reference_.allgather(input_.data(), out.data(), shape_.count); break;
      default: reference_.broadcast(out.data(), shape_.count, kRoot); break;
    }
  }
  const double seconds = now_seconds() - start;
  if (options_.check)
    for (Buffer& out : ref_outputs_)
      *wrong += count_wrong_in(out.data(), shape_.output * static_cast<int64_t>(elem_));
  return seconds;
}

}  // namespace kolo::bench
