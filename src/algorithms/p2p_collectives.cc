#include "algorithms/p2p_collectives.h"

#include <cstring>

#include "algorithms/ring_allreduce.h"
#include "common/check.h"
#include "reduce/reduce.h"
#include "transport/reduction.h"

namespace kolo::algorithms {
namespace {

using transport::CollectiveOp;
using transport::CollectiveView;
using transport::PointToPoint;
using transport::RequestId;

constexpr int kCollectiveTag = 0x6b63;  // "kc"

// Requests of one call, all waited on before it returns (PointToPoint contract).
class Posted {
 public:
  explicit Posted(PointToPoint& p2p) : p2p_(p2p) {}
  ~Posted() { wait_all().ignore(); }
  Status send(int peer, const void* data, size_t bytes) {
    RequestId id = 0;
    KOLO_RETURN_IF_ERROR(p2p_.isend(peer, data, bytes, kCollectiveTag, &id));
    ids_.push_back(id);
    return Status::OK();
  }
  Status recv(int peer, void* data, size_t bytes) {
    RequestId id = 0;
    KOLO_RETURN_IF_ERROR(p2p_.irecv(peer, data, bytes, kCollectiveTag, &id));
    ids_.push_back(id);
    return Status::OK();
  }
  // Waits for every request; the first error, after all have completed.
  Status wait_all() {
    Status first;
    for (RequestId id : ids_) {
      Status s = p2p_.wait(id);
      if (first.ok() && !s.ok()) first = s;
    }
    ids_.clear();
    return first;
  }

 private:
  PointToPoint& p2p_;
  std::vector<RequestId> ids_;
};

// Byte offsets of the blocks of `counts` (elements of `elem` bytes).
std::vector<size_t> offsets(const std::vector<int64_t>& counts, size_t elem) {
  std::vector<size_t> out(counts.size() + 1, 0);
  for (size_t i = 0; i < counts.size(); ++i) out[i + 1] = out[i] + static_cast<size_t>(counts[i]) * elem;
  return out;
}

Status check_counts(const char* what, const std::vector<int64_t>& counts, int size) {
  if (static_cast<int>(counts.size()) != size)
    return invalid_argument(std::string(what) + ": " + std::to_string(counts.size()) +
                            " counts for " + std::to_string(size) + " ranks");
  for (int64_t c : counts)
    if (c < 0) return invalid_argument(std::string(what) + ": a negative count");
  return Status::OK();
}

int mod(int a, int n) { return ((a % n) + n) % n; }

}  // namespace

Status P2pCollectives::supports(CollectiveOp op, const CollectiveView& view) {
  if (view.device.kind != DeviceKind::kCpu)
    return unsupported("kolo's point-to-point collectives take host memory only");
  if (!is_valid(view.dtype)) return unsupported("an unknown dtype");
  if (op == CollectiveOp::kReducescatter) {
    const ReduceOp r = view.reduction.op;
    if (r != ReduceOp::kSum && r != ReduceOp::kMin && r != ReduceOp::kMax && r != ReduceOp::kProduct)
      return unsupported(std::string("reducescatter with ") + op_name(r));
  }
  return Status::OK();
}

Status P2pCollectives::run(CollectiveOp op, const CollectiveView& view) {
  switch (op) {
    case CollectiveOp::kAllgather: return allgather(view);
    case CollectiveOp::kBroadcast: return broadcast(view);
    case CollectiveOp::kAlltoall: return alltoall(view);
    case CollectiveOp::kReducescatter: {
      auto work = transport::scaled_reducescatter(
          view, p2p_.rank(), &scaled_, [&](const CollectiveView& v) {
            return std::make_unique<transport::CompletedWork>(reducescatter(v));
          });
      return work->wait();
    }
  }
  return internal_error("an unknown collective");
}

Status P2pCollectives::allgather(const CollectiveView& view) {
  const int n = p2p_.size(), me = p2p_.rank();
  KOLO_RETURN_IF_ERROR_AS_IS(check_counts("allgather", view.recv_counts, n));
  const size_t elem = dtype_size(view.dtype);
  const std::vector<size_t> at = offsets(view.recv_counts, elem);
  char* out = static_cast<char*>(view.output);
  auto block = [&](int r) { return at[r + 1] - at[r]; };
  if (block(me) > 0 && view.input != out + at[me]) std::memmove(out + at[me], view.input, block(me));
  const int right = mod(me + 1, n), left = mod(me - 1, n);
  for (int s = 0; s + 1 < n; ++s) {
    Posted step(p2p_);
    const int give = mod(me - s, n), take = mod(me - s - 1, n);
    KOLO_RETURN_IF_ERROR(step.recv(left, out + at[take], block(take)));
    KOLO_RETURN_IF_ERROR(step.send(right, out + at[give], block(give)));
    KOLO_RETURN_IF_ERROR_AS_IS(step.wait_all());
  }
  return Status::OK();
}

Status P2pCollectives::broadcast(const CollectiveView& view) {
  const int n = p2p_.size(), me = p2p_.rank();
  if (view.root < 0 || view.root >= n)
    return invalid_argument("broadcast root " + std::to_string(view.root) + " outside 0.." +
                            std::to_string(n - 1));
  const size_t bytes = static_cast<size_t>(view.count) * dtype_size(view.dtype);
  char* out = static_cast<char*>(view.output);
  if (me == view.root && bytes > 0 && view.input != out) std::memmove(out, view.input, bytes);
  // Relative rank v gets the buffer from v minus its lowest set bit, then passes
  // it to v + 2^k for every 2^k below that bit.
  const int v = mod(me - view.root, n);
  int mask = 1;
  while (mask < n) {
    if (v & mask) {
      Posted got(p2p_);
      KOLO_RETURN_IF_ERROR(got.recv(mod(v - mask + view.root, n), out, bytes));
      KOLO_RETURN_IF_ERROR_AS_IS(got.wait_all());
      break;
    }
    mask <<= 1;
  }
  Posted sends(p2p_);
  for (mask >>= 1; mask > 0; mask >>= 1)
    if (v + mask < n) KOLO_RETURN_IF_ERROR(sends.send(mod(v + mask + view.root, n), out, bytes));
  return sends.wait_all();
}

Status P2pCollectives::alltoall(const CollectiveView& view) {
  const int n = p2p_.size(), me = p2p_.rank();
  KOLO_RETURN_IF_ERROR_AS_IS(check_counts("alltoall", view.send_counts, n));
  KOLO_RETURN_IF_ERROR_AS_IS(check_counts("alltoall", view.recv_counts, n));
  const size_t elem = dtype_size(view.dtype);
  const std::vector<size_t> from = offsets(view.send_counts, elem);
  const std::vector<size_t> to = offsets(view.recv_counts, elem);
  const char* in = static_cast<const char*>(view.input);
  char* out = static_cast<char*>(view.output);
  if (to[me + 1] - to[me] != from[me + 1] - from[me])
    return invalid_argument("alltoall: this rank sends itself " +
                            std::to_string(view.send_counts[me]) + " elements and receives " +
                            std::to_string(view.recv_counts[me]));
  Posted all(p2p_);
  for (int s = 1; s < n; ++s) {  // pairwise order: each rank's first partner differs
    const int src = mod(me - s, n);
    KOLO_RETURN_IF_ERROR(all.recv(src, out + to[src], to[src + 1] - to[src]));
  }
  for (int s = 1; s < n; ++s) {
    const int dst = mod(me + s, n);
    KOLO_RETURN_IF_ERROR(all.send(dst, in + from[dst], from[dst + 1] - from[dst]));
  }
  if (to[me + 1] > to[me]) std::memmove(out + to[me], in + from[me], to[me + 1] - to[me]);
  return all.wait_all();
}

Status P2pCollectives::reducescatter(const CollectiveView& view) {
  const int n = p2p_.size(), me = p2p_.rank();
  KOLO_RETURN_IF_ERROR_AS_IS(check_counts("reducescatter", view.recv_counts, n));
  const size_t elem = dtype_size(view.dtype);
  const std::vector<size_t> at = offsets(view.recv_counts, elem);
  auto block = [&](int r) { return at[r + 1] - at[r]; };
  if (work_.size() < at[n]) work_.resize(at[n]);
  if (at[n] > 0) std::memcpy(work_.data(), view.input, at[n]);
  const int right = mod(me + 1, n), left = mod(me - 1, n);
  for (int s = 0; s + 1 < n; ++s) {
    const int give = mod(me - s - 1, n), take = mod(me - s - 2, n);
    if (arrived_.size() < block(take)) arrived_.resize(block(take));
    Posted step(p2p_);
    KOLO_RETURN_IF_ERROR(step.recv(left, arrived_.data(), block(take)));
    KOLO_RETURN_IF_ERROR(step.send(right, work_.data() + at[give], block(give)));
    KOLO_RETURN_IF_ERROR_AS_IS(step.wait_all());
    reduce::reduce_inplace(work_.data() + at[take], arrived_.data(),
                           static_cast<int64_t>(block(take) / elem), view.dtype, view.reduction.op);
  }
  if (block(me) > 0) std::memcpy(view.output, work_.data() + at[me], block(me));
  return Status::OK();
}

namespace {

class RingWithCollectives : public transport::Transport {
 public:
  explicit RingWithCollectives(PointToPoint& p2p)
      : ring_(make_ring_transport(p2p)), collectives_(p2p) {}
  const char* name() const override { return ring_->name(); }
  Status supports(const transport::Bucket& bucket) const override { return ring_->supports(bucket); }
  std::unique_ptr<transport::Work> allreduce(const transport::Bucket& bucket) override {
    return ring_->allreduce(bucket);
  }
  void tune(const transport::Tuning& tuning) override { ring_->tune(tuning); }
  Status supports_collective(CollectiveOp op, const CollectiveView& view) const override {
    return P2pCollectives::supports(op, view);
  }
  std::unique_ptr<transport::Work> collective(CollectiveOp op, const CollectiveView& view) override {
    return std::make_unique<transport::CompletedWork>(collectives_.run(op, view));
  }

 private:
  std::unique_ptr<transport::Transport> ring_;
  P2pCollectives collectives_;
};

}  // namespace

std::unique_ptr<transport::Transport> make_ring_with_collectives(PointToPoint& p2p) {
  return std::make_unique<RingWithCollectives>(p2p);
}

}  // namespace kolo::algorithms
