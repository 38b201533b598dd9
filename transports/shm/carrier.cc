#include "transports/shm/carrier.h"

#include <cstring>
#include <vector>

#include "reduce/fold.h"
#include "reduce/reduce.h"
#include "transport/reduction.h"
#include "transports/shm/allreduce.h"
#include "transports/shm/collectives.h"

namespace kolo::shm {
namespace {

// memcpy, for parts that may be empty (a rank that gives no rows passes no buffer).
void copy(void* to, const void* from, size_t bytes) {
  if (bytes > 0) std::memcpy(to, from, bytes);
}

size_t bytes_of(int64_t count, DataType dtype) {
  return static_cast<size_t>(count) * dtype_size(dtype);
}

}  // namespace

bool ShmCarrier::fits(const transport::Bucket& bucket, size_t limit) const {
  if (!is_elementwise(bucket.reduction.op) || bucket.bytes() > limit) return false;
  // Note [Kolo memory does not ride] (carrier.h).
  return engine_ == nullptr || bucket.tensors.size() != 1 ||
         !engine_->reads_in_place(bucket.tensors[0], bucket.dtype, bucket.reduction.prescale);
}

void ShmCarrier::pack(const transport::Bucket& bucket, char* slot) const {
  for (const transport::BucketTensor& t : bucket.tensors) {
    if (t.count == 0) continue;
    reduce::copy_scaled(slot, t.input, t.count, bucket.dtype, bucket.reduction.prescale);
    slot += bytes_of(t.count, bucket.dtype);
  }
}

bool ShmCarrier::pack(Collective op, const transport::CollectiveView& part, char* slot,
                       size_t limit, size_t capacity) const {
  // Note [Kolo memory does not ride] (carrier.h).
  if (collectives_ != nullptr && collectives_->reads_mapped(op, part, rank_)) return false;
  switch (op) {
    case Collective::kBroadcast:
    case Collective::kAllgather: {
      const size_t bytes = bytes_of(part.count, part.dtype);
      if (bytes > limit) return false;
      if (op == Collective::kAllgather || rank_ == part.root) copy(slot, part.input, bytes);
      return true;
    }
    case Collective::kAlltoall: {
      const size_t n = part.send_counts.size();
      const size_t header = n * sizeof(int64_t);
      int64_t sent = 0;
      for (int64_t count : part.send_counts) sent += count;
      const size_t data = bytes_of(sent, part.dtype);
      if (data > limit || header + data > capacity) return false;
      int64_t at = 0;
      for (size_t d = 0; d < n; ++d) {
        std::memcpy(slot + d * sizeof(int64_t), &at, sizeof(int64_t));
        at += part.send_counts[d];
      }
      copy(slot + header, part.input, data);
      return true;
    }
    case Collective::kReducescatter:
      if (bytes_of(part.count, part.dtype) > limit || !is_elementwise(part.reduction.op))
        return false;
      reduce::copy_scaled(slot, part.input, part.count, part.dtype, part.reduction.prescale);
      return true;
    default:
      return false;  // allreduces ride as buckets; groups, barriers and joins never
  }
}

// The parts, already prescaled, reduced in rank order into each tensor's output,
// then the output factor: what the shm engine's one round computes, in the same
// order.
void ShmCarrier::finish(const transport::Bucket& bucket,
                         const std::vector<const char*>& from) const {
  const transport::Reduction& r = bucket.reduction;
  size_t at = 0;
  for (const transport::BucketTensor& t : bucket.tensors) {
    const size_t bytes = bytes_of(t.count, bucket.dtype);
    if (bytes == 0) continue;
    if (from.size() == 1) {
      std::memcpy(t.output, from[0] + at, bytes);
    } else if (r.deterministic) {  // Note [Deterministic reductions] (transport/transport.h)
      std::vector<const void*> in;
      for (const char* f : from) in.push_back(f + at);
      reduce::fold(t.output, in.data(), static_cast<int>(in.size()), t.count, bucket.dtype, r.op);
    } else {
      reduce::reduce(t.output, from[0] + at, from[1] + at, t.count, bucket.dtype, r.op);
      for (size_t p = 2; p < from.size(); ++p)
        reduce::reduce(t.output, t.output, from[p] + at, t.count, bucket.dtype, r.op);
    }
    if (r.scales_output()) transport::finish_output(r, t.output, t.count, bucket.dtype);
    at += bytes;
  }
}

void ShmCarrier::finish(Collective op, const transport::CollectiveView& view,
                         const std::vector<const char*>& from) const {
  const size_t elem = dtype_size(view.dtype);
  char* out = static_cast<char*>(view.output);
  const size_t me = static_cast<size_t>(rank_);
  switch (op) {
    case Collective::kBroadcast:  // in place on the root
      if (rank_ != view.root) copy(out, from[static_cast<size_t>(view.root)], bytes_of(view.count, view.dtype));
      return;
    case Collective::kAllgather:
      for (size_t r = 0; r < from.size(); ++r) {
        const size_t bytes = bytes_of(view.recv_counts[r], view.dtype);
        copy(out, from[r], bytes);
        out += bytes;
      }
      return;
    case Collective::kAlltoall: {
      const size_t header = from.size() * sizeof(int64_t);
      for (size_t r = 0; r < from.size(); ++r) {
        int64_t at = 0;
        std::memcpy(&at, from[r] + me * sizeof(int64_t), sizeof(int64_t));
        const size_t bytes = bytes_of(view.recv_counts[r], view.dtype);
        copy(out, from[r] + header + static_cast<size_t>(at) * elem, bytes);
        out += bytes;
      }
      return;
    }
    case Collective::kReducescatter: {
      // As the shm engine does: the own prescaled block, then each peer's in rank order.
      int64_t at = 0;
      for (size_t r = 0; r < me; ++r) at += view.recv_counts[r];
      const int64_t m = view.recv_counts[me];
      const size_t skip = static_cast<size_t>(at) * elem;
      if (m == 0) return;
      copy(out, from[me] + skip, bytes_of(m, view.dtype));
      for (size_t p = 0; p < from.size(); ++p) {
        if (p == me) continue;
        reduce::reduce(out, out, from[p] + skip, m, view.dtype, view.reduction.op);
      }
      transport::finish_output(view.reduction, out, m, view.dtype);
      return;
    }
    default:
      return;
  }
}

}  // namespace kolo::shm
