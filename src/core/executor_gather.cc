#include "core/executor_gather.h"

#include <cstring>

namespace kolo::core {

using transport::CollectiveView;
using transport::Work;

namespace {

void copy_bytes(void* to, const void* from, size_t bytes) {
  if (bytes > 0) std::memcpy(to, from, bytes);  // memcpy must not get NULL, even for 0 bytes
}

}  // namespace

Status GatherFamily::start(Batch& batch, std::unique_ptr<Work>* work) {
  step_ = Step::kNone;
  const TensorParams& params = *batch.params;
  const bool packed_group = params.collective == Collective::kGroupedAllgather &&
                            params.device_kind == DeviceKind::kCpu &&
                            batch.planned_bytes <= context_.threshold &&
                            batch.planned_bytes < context_.alone_bytes;
  if (batch.responses.size() > 1 || packed_group) {
    return params.collective == Collective::kBroadcast ? start_fused_broadcast(batch, work)
                                                       : start_fused_allgather(batch, work);
  }
  TensorEntry& entry = *batch.entries[0];
  const Response& response = *batch.responses[0];
  switch (params.collective) {
    case Collective::kBroadcast: return start_broadcast(entry, response.params, work);
    case Collective::kAllgather: return start_allgather(entry, response, work);
    case Collective::kGroupedAllgather: return start_grouped(entry, response, work);
    default: return internal_error("GatherFamily: not an allgather or broadcast");
  }
}

Status GatherFamily::next(Batch& batch, std::unique_ptr<Work>* work) {
  const Step step = step_;
  step_ = Step::kNone;
  switch (step) {
    case Step::kUnpackAllgather: unpack_allgather(); return Status::OK();
    case Step::kUnpackBroadcast: unpack_broadcast(batch); return Status::OK();
    case Step::kMembers:
      step_ = Step::kMembers;
      return start_members(DeviceKind::kCpu, group_entry_->members.size(), &member_,
                           [this](size_t m, std::unique_ptr<Work>* w) { return start_member(m, w); },
                           work);
    case Step::kNone: return Status::OK();
  }
  return Status::OK();
}

Status GatherFamily::start_broadcast(TensorEntry& entry, const TensorParams& params,
                                     std::unique_ptr<Work>* work) {
  if (params.count == 0) return Status::OK();
  CollectiveView view = context_.view_of(entry);
  if (entry.device.kind == DeviceKind::kCpu) {  // host transports broadcast in place
    if (context_.rank == params.root && entry.input != entry.output)
      std::memcpy(entry.output, entry.input, params.bytes());
    view.input = entry.output;
  }
  view.count = params.count;
  view.root = params.root;
  return context_.start_on_transport(Collective::kBroadcast, view, work);
}

Status GatherFamily::start_allgather(TensorEntry& entry, const Response& response,
                                     std::unique_ptr<Work>* work) {
  const TensorParams& p = response.params;
  CollectiveView view = context_.view_of(entry);
  int64_t total = 0;
  view.recv_counts.reserve(response.rows_per_rank.size());
  for (int64_t rows : response.rows_per_rank) {
    view.recv_counts.push_back(rows * p.row_count);
    total += rows * p.row_count;
  }
  KOLO_CHECK_EQ(view.recv_counts[context_.rank], entry.request.params.count);
  char* out = nullptr;
  KOLO_RETURN_IF_ERROR(
      output_for(entry, response, static_cast<size_t>(total) * dtype_size(p.dtype), &out));
  view.output = out;
  view.callers_output = p.into;
  if (total == 0) return Status::OK();
  return context_.start_on_transport(Collective::kAllgather, view, work);
}

Status GatherFamily::output_for(TensorEntry& entry, const Response& response, size_t bytes,
                                char** out) {
  if (response.params.into) {
    // The output holds size x this rank's rows (checked at submission), and the
    // negotiation gave every rank the same rows.
    if (bytes != entry.request.params.bytes() * static_cast<size_t>(context_.world_size))
      return internal_error("tensor '" + response.name + "': gathered " + std::to_string(bytes) +
                            " bytes into an output of " +
                            std::to_string(entry.request.params.bytes() *
                                           static_cast<size_t>(context_.world_size)));
    *out = static_cast<char*>(entry.output);
  } else {
    KOLO_RETURN_IF_ERROR(context_.allocate_output(entry, bytes));
    *out = entry.handle->output.data();
  }
  if (entry.handle != nullptr) entry.handle->splits = response.rows_per_rank;
  return Status::OK();
}

// Every member's gathered rows, member after member, in one handle-owned output;
// the splits are the response's member-major rows (kolo.h).
Status GatherFamily::start_grouped(TensorEntry& entry, const Response& response,
                                   std::unique_ptr<Work>* work) {
  const TensorParams& p = response.params;
  const size_t n = static_cast<size_t>(context_.world_size);
  KOLO_CHECK_EQ(response.rows_per_rank.size(), entry.members.size() * n);
  int64_t total = 0;
  for (size_t k = 0; k < response.rows_per_rank.size(); ++k)
    total += response.rows_per_rank[k] * p.member_row_counts[k / n];
  KOLO_RETURN_IF_ERROR(
      context_.allocate_output(entry, static_cast<size_t>(total) * dtype_size(p.dtype)));
  entry.handle->splits = response.rows_per_rank;
  group_entry_ = &entry;
  group_response_ = &response;
  member_ = 0;
  member_out_ = entry.handle->output.data();
  step_ = Step::kMembers;
  return start_members(entry.device.kind, entry.members.size(), &member_,
                       [this](size_t m, std::unique_ptr<Work>* w) { return start_member(m, w); },
                       work);
}

Status GatherFamily::start_member(size_t m, std::unique_ptr<Work>* work) {
  const TensorEntry& entry = *group_entry_;
  const Response& response = *group_response_;
  const size_t n = static_cast<size_t>(context_.world_size);
  const int64_t row = response.params.member_row_counts[m];
  CollectiveView view = context_.view_of(entry);
  view.input = entry.members[m].input;
  view.output = member_out_;
  int64_t member_total = 0;
  for (size_t r = 0; r < n; ++r) {
    view.recv_counts.push_back(response.rows_per_rank[m * n + r] * row);
    member_total += view.recv_counts.back();
  }
  KOLO_CHECK_EQ(view.recv_counts[static_cast<size_t>(context_.rank)], entry.members[m].elements);
  member_out_ += static_cast<size_t>(member_total) * dtype_size(response.params.dtype);
  if (member_total == 0) return Status::OK();
  return context_.start_on_transport(Collective::kAllgather, view, work);
}

// batch.entries[i] is batch.responses[i]'s. Every tensor's (every member's)
// output is allocated as for the collective alone, and its splits are the same.
Status GatherFamily::plan_parts(Batch& batch) {
  const size_t n = static_cast<size_t>(context_.world_size);
  const size_t me = static_cast<size_t>(context_.rank);
  const DataType dtype = batch.responses[0]->params.dtype;
  const size_t elem = dtype_size(dtype);
  fused_dtype_ = dtype;
  parts_.clear();
  part_counts_.clear();
  for (size_t i = 0; i < batch.responses.size(); ++i) {
    const Response& r = *batch.responses[i];
    const TensorParams& p = r.params;
    TensorEntry& entry = *batch.entries[i];
    KOLO_CHECK(p.dtype == dtype);
    const bool group = p.collective == Collective::kGroupedAllgather;
    const size_t members = group ? entry.members.size() : 1;
    KOLO_CHECK_EQ(r.rows_per_rank.size(), members * n);
    char* out = nullptr;
    KOLO_RETURN_IF_ERROR(output_for(entry, r, packed_bytes(r, context_.world_size), &out));
    for (size_t m = 0; m < members; ++m) {
      const int64_t row = group ? p.member_row_counts[m] : p.row_count;
      int64_t total = 0;
      for (size_t rank = 0; rank < n; ++rank) {
        part_counts_.push_back(r.rows_per_rank[m * n + rank] * row);
        total += part_counts_.back();
      }
      KOLO_CHECK_EQ(part_counts_[parts_.size() * n + me],
                    group ? entry.members[m].elements : entry.request.params.count);
      parts_.push_back(GatherPart{group ? entry.members[m].input : entry.input, out});
      if (total > 0) out += static_cast<size_t>(total) * elem;
    }
  }
  return Status::OK();
}

// Rank r's block of the fusion buffer is every part's count from r, part after
// part; the blocks lie in rank order.
Status GatherFamily::start_fused_allgather(Batch& batch, std::unique_ptr<Work>* work) {
  KOLO_RETURN_IF_ERROR(plan_parts(batch));
  const size_t n = static_cast<size_t>(context_.world_size);
  const size_t me = static_cast<size_t>(context_.rank);
  const size_t elem = dtype_size(fused_dtype_);
  CollectiveView view;
  view.dtype = fused_dtype_;
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
  FusionBuffer& fusion = context_.fusion;
  KOLO_CHECK_LE(static_cast<size_t>(total) * elem, fusion.size());
  char* block = fusion.data() + static_cast<size_t>(cursor_[me]) * elem;
  char* at = block;
  for (size_t k = 0; k < parts_.size(); ++k) {
    const size_t bytes = static_cast<size_t>(part_counts_[k * n + me]) * elem;
    copy_bytes(at, parts_[k].input, bytes);
    at += bytes;
  }
  view.input = block;  // in place: this rank's block of the output
  view.output = fusion.data();
  KOLO_RETURN_IF_ERROR(context_.start_on_transport(Collective::kAllgather, view, work));
  step_ = Step::kUnpackAllgather;
  if (*work == nullptr) return next(batch, work);  // finished already
  return Status::OK();
}

// Each part's rows from every rank's block of the fusion buffer into its output.
void GatherFamily::unpack_allgather() {
  const size_t n = static_cast<size_t>(context_.world_size);
  const size_t elem = dtype_size(fused_dtype_);
  const char* fusion = context_.fusion.data();
  for (size_t k = 0; k < parts_.size(); ++k) {
    char* out = parts_[k].output;
    for (size_t r = 0; r < n; ++r) {
      const size_t bytes = static_cast<size_t>(part_counts_[k * n + r]) * elem;
      copy_bytes(out, fusion + static_cast<size_t>(cursor_[r]) * elem, bytes);
      out += bytes;
      cursor_[r] += part_counts_[k * n + r];
    }
  }
}

// The root's inputs one after another, broadcast in place in the fusion buffer;
// unpack_broadcast() copies them into every tensor's output.
Status GatherFamily::start_fused_broadcast(Batch& batch, std::unique_ptr<Work>* work) {
  const TensorParams& first = batch.responses[0]->params;
  const size_t elem = dtype_size(first.dtype);
  int64_t total = 0;
  for (const Response* r : batch.responses) {
    KOLO_CHECK(r->params.dtype == first.dtype && r->params.root == first.root);
    total += r->params.count;
  }
  if (total == 0) return Status::OK();
  FusionBuffer& fusion = context_.fusion;
  KOLO_CHECK_LE(static_cast<size_t>(total) * elem, fusion.size());
  if (context_.rank == first.root) {
    char* at = fusion.data();
    for (size_t i = 0; i < batch.responses.size(); ++i) {
      copy_bytes(at, batch.entries[i]->input, batch.responses[i]->params.bytes());
      at += batch.responses[i]->params.bytes();
    }
  }
  CollectiveView view;
  view.input = fusion.data();
  view.output = fusion.data();
  view.dtype = first.dtype;
  view.device = Device{DeviceKind::kCpu, 0, nullptr};
  view.count = total;
  view.root = first.root;
  KOLO_RETURN_IF_ERROR(context_.start_on_transport(Collective::kBroadcast, view, work));
  step_ = Step::kUnpackBroadcast;
  if (*work == nullptr) return next(batch, work);  // finished already
  return Status::OK();
}

// Every tensor's part of the fusion buffer into its output (on the root too,
// unless in place).
void GatherFamily::unpack_broadcast(const Batch& batch) {
  const bool root = context_.rank == batch.responses[0]->params.root;
  const char* at = context_.fusion.data();
  for (size_t i = 0; i < batch.responses.size(); ++i) {
    const TensorEntry& e = *batch.entries[i];
    if (!(root && e.output == e.input)) copy_bytes(e.output, at, batch.responses[i]->params.bytes());
    at += batch.responses[i]->params.bytes();
  }
}

// Note [Data rides with the AND]: a broadcast's part is the root's data, an
// allgather's this rank's input.
bool GatherFamily::pack(const Response& response, const TensorEntry& entry, char* slot,
                        size_t limit, size_t capacity) {
  const TensorParams& p = response.params;
  if (p.collective != Collective::kBroadcast && p.collective != Collective::kAllgather)
    return false;
  part_.input = entry.input;
  part_.dtype = p.dtype;
  part_.count = p.collective == Collective::kBroadcast ? p.count : entry.request.params.count;
  part_.root = p.root;
  return context_.carrier->pack(p.collective, part_, slot, limit, capacity);
}

}  // namespace kolo::core
