#include "core/executor_reducescatter.h"

#include "core/collective_args.h"
#include "transport/reduction.h"

namespace kolo::core {

using transport::CollectiveView;
using transport::Work;

namespace {

transport::Reduction reduction_of(const TensorParams& p, int world_size) {
  return transport::decide_reduction(p.op, p.dtype, p.prescale, p.postscale, world_size);
}

}  // namespace

Status ReducescatterFamily::start(Batch& batch, std::unique_ptr<Work>* work) {
  TensorEntry& entry = *batch.entries[0];
  const TensorParams& params = batch.responses[0]->params;
  const int n = context_.world_size;
  group_entry_ = nullptr;
  if (params.collective == Collective::kGroupedReducescatter) {
    group_entry_ = &entry;
    group_params_ = &params;
    group_reduction_ = reduction_of(params, n);
    member_ = 0;
    return start_members(entry.device.kind, entry.members.size(), &member_,
                         [this](size_t m, std::unique_ptr<Work>* w) { return start_member(m, w); },
                         work);
  }
  if (params.count == 0) return Status::OK();
  const int64_t rows = params.count / params.row_count;
  CollectiveView view = context_.view_of(entry);
  view.reduction = reduction_of(params, n);
  for (int r = 0; r < n; ++r) view.recv_counts.push_back(shard_rows(rows, r, n) * params.row_count);
  return context_.start_on_transport(Collective::kReducescatter, view, work);
}

Status ReducescatterFamily::next(Batch& batch, std::unique_ptr<Work>* work) {
  if (group_entry_ == nullptr) return Status::OK();
  return start_members(DeviceKind::kCpu, group_entry_->members.size(), &member_,
                       [this](size_t m, std::unique_ptr<Work>* w) { return start_member(m, w); },
                       work);
}

Status ReducescatterFamily::start_member(size_t m, std::unique_ptr<Work>* work) {
  const TensorEntry::Member& t = group_entry_->members[m];
  if (t.elements == 0) return Status::OK();
  const int64_t row = group_params_->member_row_counts[m];
  const int n = context_.world_size;
  CollectiveView view = context_.view_of(*group_entry_);
  view.input = t.input;
  view.output = t.output;
  view.reduction = group_reduction_;
  for (int r = 0; r < n; ++r) view.recv_counts.push_back(shard_rows(t.elements / row, r, n) * row);
  return context_.start_on_transport(Collective::kReducescatter, view, work);
}

bool ReducescatterFamily::pack(const Response& response, const TensorEntry& entry, char* slot,
                               size_t limit, size_t capacity) {
  const TensorParams& p = response.params;
  if (p.collective != Collective::kReducescatter) return false;
  part_.input = entry.input;
  part_.dtype = p.dtype;
  part_.count = p.count;
  part_.reduction = reduction_of(p, context_.world_size);
  return context_.carrier->pack(Collective::kReducescatter, part_, slot, limit, capacity);
}

}  // namespace kolo::core
