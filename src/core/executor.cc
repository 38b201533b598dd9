#include "core/executor.h"

#include <cstring>

#include "common/check.h"
#include "common/logging.h"
#include "core/fusion_planner.h"
#include "reduce/reduce.h"

namespace kolo::core {
namespace {

// Tensors may share a bucket only when everything that shapes the reduction is
// equal; count is the one thing that may differ.
bool same_fusion_class(const TensorParams& a, const TensorParams& b) {
  return a.collective == b.collective && a.dtype == b.dtype && a.op == b.op &&
         a.device == b.device && a.prescale == b.prescale && a.postscale == b.postscale;
}

ReduceOp transport_op(ReduceOp op) { return op == ReduceOp::kAverage ? ReduceOp::kSum : op; }

// The factor applied to a float result: postscale, divided by size for AVERAGE.
double output_factor(const TensorParams& p, int world_size) {
  double f = p.postscale;
  if (p.op == ReduceOp::kAverage && is_floating(p.dtype)) f /= world_size;
  return f;
}

}  // namespace

Executor::Executor(transport::Selector& selector, FusionBuffer& fusion, int world_size,
                   Complete complete)
    : selector_(selector), fusion_(fusion), world_size_(world_size), complete_(std::move(complete)) {}

void Executor::execute(const std::vector<Response>& responses,
                       std::map<std::string, TensorEntry>* pending) {
  std::vector<const Response*> ok;
  for (const Response& r : responses) {
    auto it = pending->find(r.name);
    if (r.code != Code::kOk) {
      if (it != pending->end()) {
        complete_(it->second, Status(r.code, r.message));
        pending->erase(it);
      }
      continue;
    }
    KOLO_CHECK(it != pending->end());
    ok.push_back(&r);
  }

  // Fusion classes in order of first appearance: a pure function of the list.
  std::vector<const TensorParams*> classes;
  std::vector<PlanItem> items;
  items.reserve(ok.size());
  for (const Response* r : ok) {
    int cls = -1;
    for (size_t c = 0; c < classes.size() && cls < 0; ++c)
      if (same_fusion_class(*classes[c], r->params)) cls = static_cast<int>(c);
    if (cls < 0) {
      cls = static_cast<int>(classes.size());
      classes.push_back(&r->params);
    }
    items.push_back(PlanItem{r->params.bytes(), cls});
  }

  for (const PlannedBucket& bucket : plan_buckets(items, fusion_.size())) {
    std::vector<TensorEntry*> entries;
    for (size_t i : bucket.items) entries.push_back(&pending->at(ok[i]->name));
    const TensorParams& params = ok[bucket.items[0]]->params;
    Status status = entries.size() == 1 ? run_alone(*entries[0], params)
                                        : run_fused(entries, params);
    if (!status.ok()) KOLO_LOG(kError) << "bucket " << sequence_ << ": " << status.to_string();
    ++sequence_;
    for (size_t i : bucket.items) {
      auto it = pending->find(ok[i]->name);
      complete_(it->second, status);
      pending->erase(it);
    }
  }
}

Status Executor::reduce(const void* input, void* output, const TensorParams& params) {
  transport::BucketView view;
  view.input = input;
  view.output = output;
  view.count = params.count;
  view.dtype = params.dtype;
  view.op = transport_op(params.op);
  view.device = Device{params.device, 0, nullptr};
  view.sequence = sequence_;
  if (view.count == 0) return Status::OK();
  transport::Transport* transport = nullptr;
  KOLO_RETURN_IF_ERROR(selector_.select(view, &transport));
  return transport->allreduce(view)->wait();
}

void Executor::finish_in_place(void* data, const TensorParams& params) {
  if (is_floating(params.dtype)) {
    double f = output_factor(params, world_size_);
    if (f != 1.0) reduce::scale(data, data, params.count, params.dtype, f);
  } else if (params.op == ReduceOp::kAverage) {
    reduce::divide_integer(data, params.count, params.dtype, world_size_);
  }
}

Status Executor::run_alone(TensorEntry& entry, const TensorParams& params) {
  const void* input = entry.input;
  if (params.prescale != 1.0) {
    reduce::copy_scaled(entry.output, entry.input, params.count, params.dtype, params.prescale);
    input = entry.output;
  }
  KOLO_RETURN_IF_ERROR(reduce(input, entry.output, params));
  finish_in_place(entry.output, params);
  return Status::OK();
}

Status Executor::run_fused(const std::vector<TensorEntry*>& entries, const TensorParams& params) {
  const size_t elem = dtype_size(params.dtype);
  char* buffer = fusion_.data();
  int64_t total = 0;
  for (TensorEntry* e : entries) {
    const int64_t n = e->request.params.count;
    reduce::copy_scaled(buffer + total * elem, e->input, n, params.dtype, params.prescale);
    total += n;
  }
  KOLO_CHECK_LE(static_cast<size_t>(total) * elem, fusion_.size());
  TensorParams bucket = params;
  bucket.count = total;
  KOLO_RETURN_IF_ERROR(reduce(buffer, buffer, bucket));

  const bool integer_average = !is_floating(params.dtype) && params.op == ReduceOp::kAverage;
  const double factor = is_floating(params.dtype) ? output_factor(params, world_size_) : 1.0;
  int64_t offset = 0;
  for (TensorEntry* e : entries) {
    const int64_t n = e->request.params.count;
    reduce::copy_scaled(e->output, buffer + offset * elem, n, params.dtype, factor);
    if (integer_average) reduce::divide_integer(e->output, n, params.dtype, world_size_);
    offset += n;
  }
  return Status::OK();
}

}  // namespace kolo::core
