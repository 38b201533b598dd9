// The executor's part of Note [Data rides with the AND] (negotiator.h): packing a
// cycle's bucket before the AND, and reducing the carried buckets after it.
#include <cstring>

#include "common/check.h"
#include "core/executor.h"
#include "reduce/reduce.h"
#include "transport/reduction.h"

namespace kolo::core {
namespace {

// memcpy, for parts that may be empty (a rank that gives no rows passes no buffer).
void copy(void* to, const void* from, size_t bytes) {
  if (bytes > 0) std::memcpy(to, from, bytes);
}

}  // namespace

void Executor::set_carry_bytes(size_t bytes) { carry_bytes_ = bytes; }

// Every refusal depends only on the list (cached parameters, the same on every
// rank whose list is the same), the sizes every rank sets alike and the
// selector's choice, which is the same on every rank; a rank that refuses sends
// no flag and so differs from the ranks that packed.
bool Executor::pack_ahead(const std::vector<const Response*>& ahead,
                          Pending* pending, char* slot,
                          size_t capacity) {
  const size_t limit = std::min(capacity, carry_bytes_);
  if (ahead.size() == 1 && !is_allreduce(ahead[0]->params.collective))
    return pack_collective(*ahead[0], pending, slot, limit, capacity);
  size_t bytes = 0;
  for (const Response* r : ahead) {
    if (r->params.device != DeviceKind::kCpu || !is_allreduce(r->params.collective)) return false;
    bytes += r->params.bytes();
    if (bytes > limit) return false;
  }
  plan_cycle(ahead, world_size_, threshold_, alone_bytes_, &plan_scratch_, &plan_);
  if (plan_.size() != 1 || plan_[0].items.size() != ahead.size()) return false;
  entries_.clear();
  for (size_t i : plan_[0].items) {
    auto it = pending->find(ahead[i]->name);
    if (it == pending->end()) return false;  // not this rank's own (it packs nothing then)
    entries_.push_back(&it->second);
  }
  const TensorParams& params = ahead[plan_[0].items[0]]->params;
  bucket_.tensors.clear();
  bucket_.count = 0;
  if (!describe_bucket(entries_, params, &bucket_).ok() || bucket_.count == 0) return false;
  if (!is_elementwise(bucket_.reduction.op)) return false;
  const size_t elem = dtype_size(bucket_.dtype);
  if (static_cast<size_t>(bucket_.count) * elem > limit) return false;
  // Only where the transport the bucket would take completes it from carried
  // bytes (its capabilities say so), with that transport's arithmetic.
  transport::Transport* transport = nullptr;
  if (!selector_.select(bucket_, &transport).ok() || !transport->capabilities().carries)
    return false;
  for (const transport::BucketTensor& t : bucket_.tensors) {
    if (t.count == 0) continue;
    reduce::copy_scaled(slot, t.input, t.count, bucket_.dtype, bucket_.reduction.prescale);
    slot += static_cast<size_t>(t.count) * elem;
  }
  return true;
}

// One collective alone (a plan of one item is one bucket): this rank's part of
// it, as its transport would read it. Whether it rides is decided after the AND
// (start_on_transport: where the selector picks shm, on every rank alike).
// An alltoall's part starts with this rank's offset of every destination's
// block (in elements), so that a reader finds its block without the matrix;
// the limit counts the data, the slot's capacity both.
bool Executor::pack_collective(const Response& response,
                               Pending* pending, char* slot,
                               size_t limit, size_t capacity) {
  const TensorParams& p = response.params;
  auto it = pending->find(response.name);
  if (it == pending->end() || p.device != DeviceKind::kCpu) return false;
  const TensorEntry& entry = it->second;
  const size_t elem = dtype_size(p.dtype);
  switch (p.collective) {
    case Collective::kBroadcast:
      if (p.bytes() > limit) return false;
      if (rank_ == p.root) copy(slot, entry.input, p.bytes());
      return true;
    case Collective::kAllgather:
      if (entry.request.params.bytes() > limit) return false;
      copy(slot, entry.input, entry.request.params.bytes());
      return true;
    case Collective::kAlltoall: {
      const size_t n = static_cast<size_t>(world_size_);
      if (response.rows_matrix.size() != n * n) return false;
      const size_t header = n * sizeof(int64_t);
      int64_t sent = 0;
      for (size_t d = 0; d < n; ++d) {
        std::memcpy(slot + d * sizeof(int64_t), &sent, sizeof(int64_t));
        sent += response.rows_matrix[static_cast<size_t>(rank_) * n + d] *
                entry.request.params.row_count;
      }
      const size_t data = static_cast<size_t>(sent) * elem;
      if (data > limit || header + data > capacity) return false;
      copy(slot + header, entry.input, data);
      return true;
    }
    case Collective::kReducescatter: {
      const transport::Reduction r = transport::decide_reduction(
          p.op, p.dtype, p.prescale, p.postscale, world_size_);
      if (p.bytes() > limit || !is_elementwise(r.op)) return false;
      reduce::copy_scaled(slot, entry.input, p.count, p.dtype, r.prescale);
      return true;
    }
    default:
      return false;  // groups, barriers, joins
  }
}

// A collective from the carried parts (start_on_transport, where shm was picked):
// what the shm engine computes, read from the copies that rode with the AND.
void Executor::run_carried(transport::CollectiveOp op, const transport::CollectiveView& view) {
  using transport::CollectiveOp;
  const std::vector<const char*>& from = *carried_;
  const size_t elem = dtype_size(view.dtype);
  char* out = static_cast<char*>(view.output);
  switch (op) {
    case CollectiveOp::kBroadcast:  // in place on the root
      if (rank_ != view.root)
        copy(out, from[static_cast<size_t>(view.root)], static_cast<size_t>(view.count) * elem);
      return;
    case CollectiveOp::kAllgather:
      for (size_t r = 0; r < from.size(); ++r) {
        const size_t bytes = static_cast<size_t>(view.recv_counts[r]) * elem;
        copy(out, from[r], bytes);
        out += bytes;
      }
      return;
    case CollectiveOp::kAlltoall: {
      const size_t header = from.size() * sizeof(int64_t);
      for (size_t r = 0; r < from.size(); ++r) {
        int64_t at = 0;
        std::memcpy(&at, from[r] + static_cast<size_t>(rank_) * sizeof(int64_t), sizeof(int64_t));
        const size_t bytes = static_cast<size_t>(view.recv_counts[r]) * elem;
        copy(out, from[r] + header + static_cast<size_t>(at) * elem, bytes);
        out += bytes;
      }
      return;
    }
    case CollectiveOp::kReducescatter: {
      // As the shm engine does: the own prescaled block, then each peer's in rank order.
      int64_t at = 0;
      for (int r = 0; r < rank_; ++r) at += view.recv_counts[static_cast<size_t>(r)];
      const int64_t m = view.recv_counts[static_cast<size_t>(rank_)];
      const size_t skip = static_cast<size_t>(at) * elem;
      if (m == 0) return;
      copy(out, from[static_cast<size_t>(rank_)] + skip, static_cast<size_t>(m) * elem);
      for (size_t p = 0; p < from.size(); ++p) {
        if (p == static_cast<size_t>(rank_)) continue;
        reduce::reduce(out, out, from[p] + skip, m, view.dtype, view.reduction.op);
      }
      transport::finish_output(view.reduction, out, m, view.dtype);
      return;
    }
  }
}

// The carried buckets, already prescaled, reduced in rank order into each
// tensor's output, then the output factor: what the shm engine's one round
// computes, in the same order.
Status Executor::reduce_carried(const std::vector<TensorEntry*>& entries,
                                const TensorParams& params) {
  bucket_.tensors.clear();
  bucket_.count = 0;
  KOLO_RETURN_IF_ERROR(describe_bucket(entries, params, &bucket_));
  transport_name_ = "shm+and";
  const std::vector<const char*>& from = *carried_;
  const size_t elem = dtype_size(bucket_.dtype);
  const transport::Reduction& r = bucket_.reduction;
  size_t at = 0;
  for (const transport::BucketTensor& t : bucket_.tensors) {
    const size_t bytes = static_cast<size_t>(t.count) * elem;
    if (bytes == 0) continue;
    if (from.size() == 1) {
      std::memcpy(t.output, from[0] + at, bytes);
    } else {
      reduce::reduce(t.output, from[0] + at, from[1] + at, t.count, bucket_.dtype, r.op);
      for (size_t p = 2; p < from.size(); ++p)
        reduce::reduce(t.output, t.output, from[p] + at, t.count, bucket_.dtype, r.op);
    }
    if (r.scales_output()) transport::finish_output(r, t.output, t.count, bucket_.dtype);
    at += bytes;
  }
  return Status::OK();
}

}  // namespace kolo::core
