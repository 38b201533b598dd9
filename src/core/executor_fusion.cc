// The Executor's buckets of collectives other than allreduce: a bucket of one
// response runs as that collective alone (executor_collectives.cc); a bucket of
// several allgathers or broadcasts, and a grouped allgather that fits, runs as
// one operation through the fusion buffer (Note [Fused allgather and broadcast]
// in executor.h).
#include <cstring>

#include "common/check.h"
#include "core/executor.h"

namespace kolo::core {

using transport::CollectiveOp;
using transport::CollectiveView;
using transport::Work;

namespace {

void copy_bytes(void* to, const void* from, size_t bytes) {
  if (bytes > 0) std::memcpy(to, from, bytes);  // memcpy must not get NULL, even for 0 bytes
}

}  // namespace

void Executor::run_collective(const PlannedBucket& bucket, const std::vector<const Response*>& ok,
                              Pending* pending) {
  entries_.clear();
  names_.clear();
  std::vector<const Response*> responses;
  responses.reserve(bucket.items.size());
  size_t bytes = 0;
  for (size_t i : bucket.items) {
    auto it = pending->find(ok[i]->name);
    entries_.push_back(&it->second);
    names_.push_back(&ok[i]->name);
    responses.push_back(ok[i]);
    bytes += ok[i]->params.bytes();
  }
  const TensorParams& params = responses[0]->params;
  const auto start = Timeline::Clock::now();
  for (TensorEntry* e : entries_) {
    if (flight_) flight_->advance(e->flight, FlightRecorder::State::kExecuting, start);
    if (e->handle) e->handle->stamp(HandleState::kExecuting, start);
  }
  const bool packed_group = params.collective == Collective::kGroupedAllgather &&
                            params.device == DeviceKind::kCpu && bucket.bytes <= threshold_ &&
                            bucket.bytes < alone_bytes_;
  Status started;
  std::unique_ptr<Work> work;
  if (responses.size() > 1 || packed_group) {
    started = params.collective == Collective::kBroadcast ? run_fused_broadcast(responses)
                                                          : run_fused_allgather(responses);
  } else {
    started = start_collective(*entries_[0], *responses[0], &work);
  }
  op_ = Op{bytes, params.collective, start};
  launch(std::move(started), std::move(work), entries_[0]->device.kind, pending);
}

// entries_[i] is responses[i]'s. Every tensor's (every member's) output is
// allocated as for the collective alone, and its splits are the same.
Status Executor::run_fused_allgather(const std::vector<const Response*>& responses) {
  const size_t n = static_cast<size_t>(world_size_);
  const DataType dtype = responses[0]->params.dtype;
  const size_t elem = dtype_size(dtype);
  parts_.clear();
  part_counts_.clear();
  for (size_t i = 0; i < responses.size(); ++i) {
    const Response& r = *responses[i];
    const TensorParams& p = r.params;
    TensorEntry& entry = *entries_[i];
    KOLO_CHECK(p.dtype == dtype);
    const bool group = p.collective == Collective::kGroupedAllgather;
    const size_t members = group ? entry.members.size() : 1;
    KOLO_CHECK_EQ(r.rows_per_rank.size(), members * n);
    KOLO_RETURN_IF_ERROR(allocate_output(entry, packed_bytes(r, world_size_)));
    entry.handle->splits = r.rows_per_rank;
    char* out = entry.handle->output.data();
    for (size_t m = 0; m < members; ++m) {
      const int64_t row = group ? p.member_row_counts[m] : p.row_count;
      int64_t total = 0;
      for (size_t rank = 0; rank < n; ++rank) {
        part_counts_.push_back(r.rows_per_rank[m * n + rank] * row);
        total += part_counts_.back();
      }
      KOLO_CHECK_EQ(part_counts_[parts_.size() * n + static_cast<size_t>(rank_)],
                    group ? entry.members[m].count : entry.request.params.count);
      parts_.push_back(GatherPart{group ? entry.members[m].input : entry.input, out});
      if (total > 0) out += static_cast<size_t>(total) * elem;
    }
  }
  return gather_parts(dtype);
}

// Rank r's block of the fusion buffer is every part's count from r, part after
// part; the blocks lie in rank order.
Status Executor::gather_parts(DataType dtype) {
  const size_t n = static_cast<size_t>(world_size_);
  const size_t elem = dtype_size(dtype);
  const size_t me = static_cast<size_t>(rank_);
  CollectiveView view;
  view.dtype = dtype;
  view.device = Device{DeviceKind::kCpu, 0, nullptr};
  view.recv_counts.assign(n, 0);
  for (size_t k = 0; k < parts_.size(); ++k)
    for (size_t r = 0; r < n; ++r) view.recv_counts[r] += part_counts_[k * n + r];
  cursor_.assign(n, 0);  // where each rank's block starts, then each part's rows in it
  int64_t total = 0;
  for (size_t r = 0; r < n; ++r) {
    cursor_[r] = total;
    total += view.recv_counts[r];
  }
  if (total == 0) return Status::OK();
  KOLO_CHECK_LE(static_cast<size_t>(total) * elem, fusion_.size());
  char* block = fusion_.data() + static_cast<size_t>(cursor_[me]) * elem;
  char* at = block;
  for (size_t k = 0; k < parts_.size(); ++k) {
    const size_t bytes = static_cast<size_t>(part_counts_[k * n + me]) * elem;
    copy_bytes(at, parts_[k].input, bytes);
    at += bytes;
  }
  view.input = block;  // in place: this rank's block of the output
  view.output = fusion_.data();
  std::unique_ptr<Work> work;
  KOLO_RETURN_IF_ERROR(start_on_transport(CollectiveOp::kAllgather, view, &work));
  KOLO_RETURN_IF_ERROR(work->wait());
  for (size_t k = 0; k < parts_.size(); ++k) {
    char* out = parts_[k].output;
    for (size_t r = 0; r < n; ++r) {
      const size_t bytes = static_cast<size_t>(part_counts_[k * n + r]) * elem;
      copy_bytes(out, fusion_.data() + static_cast<size_t>(cursor_[r]) * elem, bytes);
      out += bytes;
      cursor_[r] += part_counts_[k * n + r];
    }
  }
  return Status::OK();
}

// The root's inputs one after another, broadcast in place in the fusion buffer,
// then copied into every tensor's output (on the root too, unless in place).
Status Executor::run_fused_broadcast(const std::vector<const Response*>& responses) {
  const TensorParams& first = responses[0]->params;
  const size_t elem = dtype_size(first.dtype);
  int64_t total = 0;
  for (const Response* r : responses) {
    KOLO_CHECK(r->params.dtype == first.dtype && r->params.root == first.root);
    total += r->params.count;
  }
  if (total == 0) return Status::OK();
  KOLO_CHECK_LE(static_cast<size_t>(total) * elem, fusion_.size());
  const bool root = rank_ == first.root;
  if (root) {
    char* at = fusion_.data();
    for (size_t i = 0; i < responses.size(); ++i) {
      copy_bytes(at, entries_[i]->input, responses[i]->params.bytes());
      at += responses[i]->params.bytes();
    }
  }
  CollectiveView view;
  view.input = fusion_.data();
  view.output = fusion_.data();
  view.dtype = first.dtype;
  view.device = Device{DeviceKind::kCpu, 0, nullptr};
  view.count = total;
  view.root = first.root;
  std::unique_ptr<Work> work;
  KOLO_RETURN_IF_ERROR(start_on_transport(CollectiveOp::kBroadcast, view, &work));
  KOLO_RETURN_IF_ERROR(work->wait());
  const char* at = fusion_.data();
  for (size_t i = 0; i < responses.size(); ++i) {
    const TensorEntry& e = *entries_[i];
    if (!(root && e.output == e.input)) copy_bytes(e.output, at, responses[i]->params.bytes());
    at += responses[i]->params.bytes();
  }
  return Status::OK();
}

}  // namespace kolo::core
