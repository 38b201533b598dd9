#include "transport/reduction.h"

#include "common/check.h"
#include "reduce/reduce.h"

namespace kolo::transport {

Reduction decide_reduction(ReduceOp op, DataType dtype, double prescale, double postscale,
                           int world_size, bool deterministic) {
  Reduction r;
  r.deterministic = deterministic && is_floating(dtype) && op != ReduceOp::kMin &&
                    op != ReduceOp::kMax;
  r.op = op == ReduceOp::kAverage ? ReduceOp::kSum : op;  // ADASUM stays: see reduction.h
  r.prescale = prescale;
  r.postscale = postscale;
  if (op == ReduceOp::kAverage) {
    if (is_floating(dtype)) {
      r.postscale /= world_size;
    } else {
      r.divide = world_size;
    }
  }
  return r;
}

void finish_output(const Reduction& r, void* data, int64_t count, DataType dtype) {
  if (count == 0) return;
  if (r.postscale != 1.0) reduce::scale(data, data, count, dtype, r.postscale);
  if (r.divide != 1) reduce::divide_integer(data, count, dtype, r.divide);
}

namespace {

// One tensor, straight from its input into its output.
Status reduce_alone(const Bucket& b, const BucketTensor& t, const ContiguousReduce& reduce) {
  if (t.count == 0) return Status::OK();
  const void* input = t.input;
  if (b.reduction.scales_input()) {
    reduce::copy_scaled(t.output, t.input, t.count, b.dtype, b.reduction.prescale);
    input = t.output;
  }
  KOLO_RETURN_IF_ERROR_AS_IS(reduce(input, t.output, t.count)->wait());
  finish_output(b.reduction, t.output, t.count, b.dtype);
  return Status::OK();
}

// Tensors [first, last), packed into the staging buffer, reduced once, unpacked.
Status reduce_packed(const Bucket& b, size_t first, size_t last, const ContiguousReduce& reduce) {
  const size_t elem = dtype_size(b.dtype);
  int64_t total = 0;
  for (size_t k = first; k < last; ++k) {
    const BucketTensor& t = b.tensors[k];
    if (t.count == 0) continue;
    reduce::copy_scaled(b.staging + total * elem, t.input, t.count, b.dtype, b.reduction.prescale);
    total += t.count;
  }
  if (total == 0) return Status::OK();
  KOLO_RETURN_IF_ERROR_AS_IS(reduce(b.staging, b.staging, total)->wait());
  const double factor = b.reduction.postscale;
  int64_t offset = 0;
  for (size_t k = first; k < last; ++k) {
    const BucketTensor& t = b.tensors[k];
    if (t.count == 0) continue;
    reduce::copy_scaled(t.output, b.staging + offset * elem, t.count, b.dtype, factor);
    if (b.reduction.divide != 1) reduce::divide_integer(t.output, t.count, b.dtype, b.reduction.divide);
    offset += t.count;
  }
  return Status::OK();
}

Status run_contiguous(const Bucket& b, const ContiguousReduce& reduce) {
  const size_t elem = dtype_size(b.dtype);
  const size_t n = b.tensors.size();
  auto bytes = [&](size_t k) { return static_cast<size_t>(b.tensors[k].count) * elem; };
  size_t i = 0;
  while (i < n) {
    if (n == 1 || bytes(i) > b.staging_bytes) {
      KOLO_RETURN_IF_ERROR_AS_IS(reduce_alone(b, b.tensors[i++], reduce));
      continue;
    }
    size_t j = i, used = 0;
    while (j < n && used + bytes(j) <= b.staging_bytes) used += bytes(j++);
    KOLO_RETURN_IF_ERROR_AS_IS(reduce_packed(b, i, j, reduce));
    i = j;
  }
  return Status::OK();
}

class ThenWork : public Work {
 public:
  ThenWork(std::unique_ptr<Work> work, std::function<Status()> finish)
      : work_(std::move(work)), finish_(std::move(finish)) {}
  bool test() override {
    if (!done_ && work_->test()) settle();
    return done_;
  }
  Status wait() override {
    if (!done_) settle();
    return status_;
  }

 private:
  void settle() {
    status_ = work_->wait();
    if (status_.ok()) status_ = finish_();
    done_ = true;
  }
  std::unique_ptr<Work> work_;
  std::function<Status()> finish_;
  bool done_ = false;
  Status status_;
};

}  // namespace

std::unique_ptr<Work> reduce_contiguous(const Bucket& bucket, const ContiguousReduce& reduce) {
  return std::make_unique<CompletedWork>(run_contiguous(bucket, reduce));
}

Bucket host_bucket(const void* input, void* output, int64_t count, DataType dtype,
                   Reduction reduction) {
  Bucket b;
  b.tensors.push_back({input, output, count, nullptr});
  b.count = count;
  b.dtype = dtype;
  b.device = Device{DeviceKind::kCpu, 0, nullptr};
  b.reduction = reduction;
  return b;
}

std::unique_ptr<Work> then(std::unique_ptr<Work> work, std::function<Status()> finish) {
  return std::make_unique<ThenWork>(std::move(work), std::move(finish));
}

std::unique_ptr<Work> scaled_reducescatter(
    const CollectiveView& view, int rank, std::vector<char>* scratch,
    const std::function<std::unique_ptr<Work>(const CollectiveView&)>& start) {
  const Reduction& r = view.reduction;
  if (!r.scales_input() && !r.scales_output()) return start(view);
  CollectiveView scaled = view;
  if (r.scales_input()) {
    int64_t total = 0;
    for (int64_t c : view.recv_counts) total += c;
    const size_t bytes = static_cast<size_t>(total) * dtype_size(view.dtype);
    if (scratch->size() < bytes) scratch->resize(bytes);
    reduce::copy_scaled(scratch->data(), view.input, total, view.dtype, r.prescale);
    scaled.input = scratch->data();
  }
  const int64_t mine = view.recv_counts.at(rank);
  void* output = view.output;
  const DataType dtype = view.dtype;
  return then(start(scaled), [r, output, mine, dtype] {
    finish_output(r, output, mine, dtype);
    return Status::OK();
  });
}

}  // namespace kolo::transport
