// Adasum by recursive vector halving and distance doubling (Horovod's "VHDD").
//
// n = 2^k ranks are the leaves of a binary tree: at level L = 1, 2, 4, ..., n/2
// the pair (r, r ^ L) combines the vectors of the two subtrees of L ranks each
// that it stands for. For n = 4 the result is, per tensor,
//
//     adasum( adasum(x0, x1), adasum(x2, x3) )        (adasum_math.h)
//
// Phase 1 (reduce), k levels. Both ranks of a pair hold the same segment of the
// fused buffer (at level 1, all of it). The lower rank (bit L clear) keeps the
// first half and sends the second; the upper rank keeps the second and sends
// the first. Each now holds, for its half, its own subtree's vector (a, in
// place) and the other subtree's (b, received into scratch). Adasum needs a.b,
// |a|^2 and |b|^2 over the *whole* tensor, which is by now spread over the 2L
// ranks of the subtree being formed, each holding a disjoint piece. So each rank
// computes the sums of its pieces, per tensor (a bucket's tensors never mix),
// and those 2L ranks add them up by recursive doubling over rank ^ 1, ^ 2, ...,
// ^ L. Every step computes mine + theirs and float addition commutes, so all 2L
// ranks end with bit-identical sums, hence identical coefficients. Then
// a = ca a + cb b on this rank's half.
//
//   n = 4, one tensor of 8 elements [0, 8):
//   level 1, pairs (0,1) (2,3): ranks 0 and 2 keep [0,4), ranks 1 and 3 [4,8);
//            sums over {0,1} and over {2,3}
//   level 2, pairs (0,2) (1,3): rank 0 keeps [0,2), rank 2 [2,4), rank 1 [4,6),
//            rank 3 [6,8); sums over {0,1,2,3}
//
// After phase 1 each rank holds the finished values of its segment. Phase 2
// (allgather) replays the levels backwards: each pair swaps segments, so a rank's
// segment doubles per level until it is the whole buffer again.
//
// Cost per rank: in each phase k exchanges of 1/2, 1/4, ..., 1/n of the buffer
// ((n-1)/n of it in all, as a ring moves), plus k(k+1)/2 exchanges of three
// doubles per tensor.
//
// Only power-of-two worlds, as in Horovod (whose FusedAllreduce throws "Running
// Adasum with non-power-of-two ranks is not supported yet"): run() refuses other
// sizes before sending anything, and the core refuses such calls up front
// (Note [Adasum's limits] in src/core/collective_args.cc).
#include "algorithms/adasum.h"

#include <string>

#include "algorithms/tags.h"
#include "common/check.h"
#include "reduce/reduce.h"
#include "transport/reduction.h"

namespace kolo::algorithms {
namespace {

using adasum::Segment;
using transport::PointToPoint;
using transport::RequestId;

constexpr int kDataTag = tags::kAdasumData;  // Note [Tag spaces] in tags.h
constexpr int kSumsTag = tags::kAdasumSums;

// Receives `recv_bytes` from `peer` while sending `send_bytes` to it, and waits
// for both; both requests are waited on even when one fails (PointToPoint's
// contract). A side of 0 bytes posts nothing: the peer skips it too, since the
// two sides of a pair agree on every size.
Status exchange(PointToPoint& p2p, int peer, int tag, const void* send, size_t send_bytes,
                void* recv, size_t recv_bytes) {
  RequestId r = 0, s = 0;
  bool have_r = false, have_s = false;
  Status posted;
  if (recv_bytes > 0) {
    posted = p2p.irecv(peer, recv, recv_bytes, tag, &r);
    have_r = posted.ok();
  }
  if (posted.ok() && send_bytes > 0) {
    posted = p2p.isend(peer, send, send_bytes, tag, &s);
    have_s = posted.ok();
  }
  Status got = have_r ? p2p.wait(r) : Status::OK();
  Status sent = have_s ? p2p.wait(s) : Status::OK();
  if (!posted.ok()) return posted;
  return got.ok() ? sent : got;
}

}  // namespace

AdasumAllreduce::AdasumAllreduce(PointToPoint& p2p) : p2p_(p2p) {}

Status AdasumAllreduce::run(void* data, const std::vector<int64_t>& counts, DataType dtype) {
  const int size = p2p_.size();
  const int rank = p2p_.rank();
  if (!adasum::is_power_of_two(size))
    return unsupported("adasum: needs a power-of-two number of ranks (as Horovod), this world has " +
                       std::to_string(size));
  if (!is_floating(dtype)) return invalid_argument("adasum: dtype must be floating, not " + dtype_name(dtype));
  offsets_.assign(1, 0);
  for (int64_t c : counts) offsets_.push_back(offsets_.back() + c);
  const int64_t total = offsets_.back();
  if (size == 1 || total == 0) return Status::OK();
  const size_t elem = dtype_size(dtype);
  const size_t scratch_bytes = static_cast<size_t>(total - total / 2) * elem;
  if (scratch_.size() < scratch_bytes) scratch_.resize(scratch_bytes);  // grow-only
  sums_.resize(3 * counts.size());
  incoming_.resize(sums_.size());
  char* bytes = static_cast<char*>(data);
  auto at = [&](const Segment& s) { return bytes + static_cast<size_t>(s.begin) * elem; };
  auto length = [&](const Segment& s) { return static_cast<size_t>(s.count) * elem; };

  levels_.clear();
  Segment segment{0, total};
  for (int level = 1; level < size; level <<= 1) {
    Level l;
    l.level = level;
    l.peer = rank ^ level;
    l.lower = (rank & level) == 0;
    adasum::halve(segment, l.lower, &l.keep, &l.give);
    KOLO_RETURN_IF_ERROR(exchange(p2p_, l.peer, kDataTag, at(l.give), length(l.give),
                                  scratch_.data(), length(l.keep)));
    KOLO_RETURN_IF_ERROR(reduce_level(bytes, l, dtype));
    levels_.push_back(l);
    segment = l.keep;
  }
  for (auto l = levels_.rbegin(); l != levels_.rend(); ++l) {
    KOLO_RETURN_IF_ERROR(exchange(p2p_, l->peer, kDataTag, at(l->keep), length(l->keep),
                                  at(l->give), length(l->give)));
  }
  return Status::OK();
}

// Combines this rank's half (in `data`) with the peer's (in scratch_), tensor by
// tensor, with the tensor's whole-vector sums over the level's group.
Status AdasumAllreduce::reduce_level(char* data, const Level& l, DataType dtype) {
  const size_t elem = dtype_size(dtype);
  const size_t n = offsets_.size() - 1;
  auto piece = [&](size_t i) {
    return adasum::overlap(l.keep, Segment{offsets_[i], offsets_[i + 1] - offsets_[i]});
  };
  auto mine = [&](const Segment& p) { return data + static_cast<size_t>(p.begin) * elem; };
  auto theirs = [&](const Segment& p) {
    return scratch_.data() + static_cast<size_t>(p.begin - l.keep.begin) * elem;
  };
  for (size_t i = 0; i < n; ++i) {
    const Segment p = piece(i);
    adasum::DotNorms d;
    if (p.count > 0) d = adasum::dot_and_norms(mine(p), theirs(p), p.count, dtype);
    // Stored as (a.b, |lower's|^2, |upper's|^2): the same slots on both sides.
    sums_[3 * i] = d.dot;
    sums_[3 * i + 1] = l.lower ? d.a : d.b;
    sums_[3 * i + 2] = l.lower ? d.b : d.a;
  }
  KOLO_RETURN_IF_ERROR_AS_IS(group_sum(l.level));
  for (size_t i = 0; i < n; ++i) {
    const Segment p = piece(i);
    if (p.count == 0) continue;
    const double dot = sums_[3 * i], lower = sums_[3 * i + 1], upper = sums_[3 * i + 2];
    const adasum::Coefficients c =
        l.lower ? adasum::coefficients(dot, lower, upper) : adasum::coefficients(dot, upper, lower);
    adasum::scaled_add(mine(p), theirs(p), p.count, dtype, c);
  }
  return Status::OK();
}

// sums_ summed over the 2 * level ranks that share rank / (2 * level).
Status AdasumAllreduce::group_sum(int level) {
  const size_t bytes = sums_.size() * sizeof(double);
  for (int d = 1; d <= level; d <<= 1) {
    KOLO_RETURN_IF_ERROR(exchange(p2p_, p2p_.rank() ^ d, kSumsTag, sums_.data(), bytes,
                                  incoming_.data(), bytes));
    for (size_t j = 0; j < sums_.size(); ++j) sums_[j] = sums_[j] + incoming_[j];
  }
  return Status::OK();
}

namespace {

class AdasumTransport : public transport::Transport {
 public:
  explicit AdasumTransport(PointToPoint& p2p) : adasum_(p2p), size_(p2p.size()) {}

  const char* name() const override { return "adasum"; }
  transport::Capabilities capabilities() const override {
    transport::Capabilities c;
    c.adasum = true;
    c.host = true;
    c.dtypes = (1u << static_cast<int>(DataType::kFloat16)) |
               (1u << static_cast<int>(DataType::kBfloat16)) |
               (1u << static_cast<int>(DataType::kFloat32)) |
               (1u << static_cast<int>(DataType::kFloat64));
    c.needs_p2p = true;
    return c;
  }

  Status supports(const transport::Bucket& b) const override {
    if (b.reduction.op != ReduceOp::kAdasum)
      return unsupported("adasum: reduces op adasum only, not " + op_name(b.reduction.op));
    if (b.device.kind != DeviceKind::kCpu)
      return unsupported("adasum: CPU memory only, the bucket is on " + device_name(b.device));
    if (!is_floating(b.dtype))
      return unsupported("adasum: floating dtypes only, not " + dtype_name(b.dtype));
    if (!adasum::is_power_of_two(size_))
      return unsupported("adasum: needs a power-of-two number of ranks (as Horovod), this world has " +
                         std::to_string(size_));
    return Status::OK();
  }

  std::unique_ptr<transport::Work> allreduce(const transport::Bucket& b) override {
    return std::make_unique<transport::CompletedWork>(run(b));
  }

 private:
  // Several tensors that fit the staging buffer: packed (prescaled on the way
  // in), reduced in one run, unpacked (postscaled on the way out). A lone tensor,
  // or a group larger than staging, tensor by tensor in its output: per-tensor
  // sums make both give the same values.
  Status run(const transport::Bucket& b) {
    KOLO_RETURN_IF_ERROR_AS_IS(supports(b));
    if (b.tensors.size() == 1 || b.bytes() > b.staging_bytes) {
      for (const transport::BucketTensor& t : b.tensors) KOLO_RETURN_IF_ERROR_AS_IS(run_alone(b, t));
      return Status::OK();
    }
    const size_t elem = dtype_size(b.dtype);
    counts_.clear();
    size_t offset = 0;
    for (const transport::BucketTensor& t : b.tensors) {
      reduce::copy_scaled(b.staging + offset, t.input, t.count, b.dtype, b.reduction.prescale);
      counts_.push_back(t.count);
      offset += static_cast<size_t>(t.count) * elem;
    }
    KOLO_RETURN_IF_ERROR_AS_IS(adasum_.run(b.staging, counts_, b.dtype));
    offset = 0;
    for (const transport::BucketTensor& t : b.tensors) {
      reduce::copy_scaled(t.output, b.staging + offset, t.count, b.dtype, b.reduction.postscale);
      offset += static_cast<size_t>(t.count) * elem;
    }
    return Status::OK();
  }

  Status run_alone(const transport::Bucket& b, const transport::BucketTensor& t) {
    if (t.count == 0) return Status::OK();
    reduce::copy_scaled(t.output, t.input, t.count, b.dtype, b.reduction.prescale);
    counts_.assign(1, t.count);
    KOLO_RETURN_IF_ERROR_AS_IS(adasum_.run(t.output, counts_, b.dtype));
    transport::finish_output(b.reduction, t.output, t.count, b.dtype);
    return Status::OK();
  }

  AdasumAllreduce adasum_;
  int size_;
  std::vector<int64_t> counts_;
};

}  // namespace

std::unique_ptr<transport::Transport> make_adasum_transport(PointToPoint& p2p) {
  return std::make_unique<AdasumTransport>(p2p);
}

}  // namespace kolo::algorithms
