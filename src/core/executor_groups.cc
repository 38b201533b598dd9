// The Executor's grouped allgather and grouped reducescatter: one response, one
// transport call per member (Note [Grouped collectives] in executor.h).
#include "common/check.h"
#include "core/collective_args.h"
#include "core/executor.h"
#include "transport/reduction.h"

namespace kolo::core {

using transport::CollectiveOp;
using transport::CollectiveView;
using transport::Work;

namespace {

// The members' device Work, complete when every part is. The parts run in order
// on the transport's stream, so the last part's done event is the group's.
class GroupWork : public Work {
 public:
  explicit GroupWork(std::vector<std::unique_ptr<Work>> parts) : parts_(std::move(parts)) {}
  bool test() override {
    for (auto& p : parts_)
      if (!p->test()) return false;
    return true;
  }
  Status wait() override {
    Status first;
    for (auto& p : parts_) {
      Status s = p->wait();
      if (first.ok() && !s.ok()) first = std::move(s);
    }
    return first;
  }
  std::shared_ptr<transport::DeviceEvent> done_event() const override {
    return parts_.back()->done_event();
  }

 private:
  std::vector<std::unique_ptr<Work>> parts_;
};

}  // namespace

Status Executor::start_group_part(TensorEntry& entry, CollectiveOp op, const CollectiveView& view,
                                  std::vector<std::unique_ptr<Work>>* parts) {
  std::unique_ptr<Work> part;
  KOLO_RETURN_IF_ERROR(start_on_transport(op, view, &part));
  // Host transports reuse their scratch from call to call: each part ends before
  // the next starts (as host buckets do).
  if (entry.device.kind == DeviceKind::kCpu) return part->wait();
  parts->push_back(std::move(part));
  return Status::OK();
}

Status Executor::finish_group(std::vector<std::unique_ptr<Work>> parts,
                              std::unique_ptr<Work>* work) {
  if (!parts.empty()) *work = std::make_unique<GroupWork>(std::move(parts));
  return Status::OK();
}

// Every member's gathered rows, member after member, in one handle-owned output;
// the splits are the response's member-major rows (kolo.h).
Status Executor::start_grouped_allgather(TensorEntry& entry, const Response& response,
                                         std::unique_ptr<Work>* work) {
  const TensorParams& p = response.params;
  const size_t members = entry.members.size();
  const size_t n = static_cast<size_t>(world_size_);
  KOLO_CHECK_EQ(response.rows_per_rank.size(), members * n);
  int64_t total = 0;
  for (size_t k = 0; k < response.rows_per_rank.size(); ++k)
    total += response.rows_per_rank[k] * p.member_row_counts[k / n];
  const size_t elem = dtype_size(p.dtype);
  KOLO_RETURN_IF_ERROR(allocate_output(entry, static_cast<size_t>(total) * elem));
  entry.handle->splits = response.rows_per_rank;
  char* out = entry.handle->output.data();
  std::vector<std::unique_ptr<Work>> parts;
  for (size_t m = 0; m < members; ++m) {
    CollectiveView view = view_of(entry);
    view.input = entry.members[m].input;
    view.output = out;
    int64_t member_total = 0;
    for (size_t r = 0; r < n; ++r) {
      view.recv_counts.push_back(response.rows_per_rank[m * n + r] * p.member_row_counts[m]);
      member_total += view.recv_counts.back();
    }
    KOLO_CHECK_EQ(view.recv_counts[static_cast<size_t>(rank_)], entry.members[m].count);
    out += static_cast<size_t>(member_total) * elem;
    if (member_total > 0)
      KOLO_RETURN_IF_ERROR(start_group_part(entry, CollectiveOp::kAllgather, view, &parts));
  }
  return finish_group(std::move(parts), work);
}

Status Executor::start_grouped_reducescatter(TensorEntry& entry, const TensorParams& params,
                                             std::unique_ptr<Work>* work) {
  const transport::Reduction reduction = transport::decide_reduction(
      params.op, params.dtype, params.prescale, params.postscale, world_size_);
  std::vector<std::unique_ptr<Work>> parts;
  for (size_t m = 0; m < entry.members.size(); ++m) {
    const TensorEntry::Member& t = entry.members[m];
    if (t.count == 0) continue;
    const int64_t row = params.member_row_counts[m];
    CollectiveView view = view_of(entry);
    view.input = t.input;
    view.output = t.output;
    view.reduction = reduction;
    for (int r = 0; r < world_size_; ++r)
      view.recv_counts.push_back(shard_rows(t.count / row, r, world_size_) * row);
    KOLO_RETURN_IF_ERROR(start_group_part(entry, CollectiveOp::kReducescatter, view, &parts));
  }
  return finish_group(std::move(parts), work);
}

}  // namespace kolo::core
