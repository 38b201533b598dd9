// The "ring" transport: kolo's own engines over one world's point-to-point verbs
// behind the Transport seam (see make_ring_transport in ring_allreduce.h).
#include <memory>
#include <vector>

#include "algorithms/p2p_collectives.h"
#include "algorithms/ring_allreduce.h"
#include "transport/reduction.h"

namespace kolo::algorithms {
namespace {

using transport::CollectiveOp;
using transport::CollectiveView;

// Synchronous: every call completes before it returns. Coordinator thread only.
class RingTransport : public transport::Transport {
 public:
  RingTransport(transport::PointToPoint& p2p, RingOptions options)
      : p2p_(p2p), ring_(p2p, options), collectives_(p2p, options) {}

  const char* name() const override { return "ring"; }
  transport::Capabilities capabilities() const override {
    transport::Capabilities c;
    c.collectives = transport::kAllCollectives;
    c.host = true;
    c.needs_p2p = true;
    c.chunk = transport::Chunk::kMessageSegment;
    return c;
  }

  void tune(const transport::Tuning& tuning) override {
    if (tuning.segment_bytes == 0) return;
    ring_.set_segment_bytes(tuning.segment_bytes);
    collectives_.set_segment_bytes(tuning.segment_bytes);
  }

  Status supports(const transport::Bucket& bucket) const override {
    if (bucket.device.kind != DeviceKind::kCpu) {
      return unsupported("ring: CPU memory only, the bucket is on " + device_name(bucket.device));
    }
    return Status::OK();
  }

  std::unique_ptr<transport::Work> allreduce(const transport::Bucket& bucket) override {
    return transport::reduce_contiguous(bucket, [&](const void* in, void* out, int64_t count) {
      return std::make_unique<transport::CompletedWork>(
          ring_.run(in, out, count, bucket.dtype, bucket.reduction.op));
    });
  }

  Status supports_collective(CollectiveOp op, const CollectiveView& view) const override {
    return P2PCollectives::check(op, view, p2p_.size());
  }

  std::unique_ptr<transport::Work> collective(CollectiveOp op, const CollectiveView& view) override {
    Status ok = P2PCollectives::check(op, view, p2p_.size());
    if (!ok.ok()) return std::make_unique<transport::CompletedWork>(ok);
    auto start = [&](const CollectiveView& v) {
      return std::make_unique<transport::CompletedWork>(collectives_.run(op, v));
    };
    if (op != CollectiveOp::kReducescatter) return start(view);
    // The algorithm applies the op; the shared helper the factors (reduction.h).
    return transport::scaled_reducescatter(view, p2p_.rank(), &prescaled_, start);
  }

 private:
  transport::PointToPoint& p2p_;
  RingAllreduce ring_;
  P2PCollectives collectives_;
  std::vector<char> prescaled_;  // a reducescatter's prescaled input (grow-only)
};

}  // namespace

std::unique_ptr<transport::Transport> make_ring_transport(transport::PointToPoint& p2p,
                                                          RingOptions options) {
  return std::make_unique<RingTransport>(p2p, options);
}

}  // namespace kolo::algorithms
