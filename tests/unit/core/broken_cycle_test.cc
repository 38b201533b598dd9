// Note [A broken cycle waits for liveness's verdict] (src/core/coordinator.cc): a
// cycle whose AND comes back as garbage, on a rank whose liveness names a failed
// peer only later (as across hosts, with one host's egress dropped), ends that
// rank's operations with the verdict, KOLO_ERR_RANK_FAILED, like every other
// rank's — not with a transport error about the garbage.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>

#include "loopback_job.h"
#include "transport/liveness.h"

namespace kolo::core {
namespace {

using Clock = std::chrono::steady_clock;
using testing::LoopbackJob;
using testing::submit;
using testing::wait_code;
using transport::Bytes;

// What the ranks share: when the "cut" happened (0: not yet).
struct Cut {
  std::atomic<int64_t> at_ns{0};
  void now() { at_ns = Clock::now().time_since_epoch().count(); }
  bool happened() const { return at_ns.load() != 0; }
  Clock::duration since() const {
    return Clock::now().time_since_epoch() - Clock::duration(at_ns.load());
  }
};

// A world's control plane, passed through until the cut. After it, as across hosts
// once the peer gave up: a rank that `garbles` gets its AND back at once, garbage
// (the lengths no longer agree), with no peer taking part, as MPICH over UCX
// completed it; every wait is bounded by check_peers, which names rank 1 failed
// once `verdict_after` has passed since the cut.
class AfterACut : public transport::ControlPlane {
 public:
  AfterACut(std::unique_ptr<transport::ControlPlane> inner, const Cut& cut, bool garbles,
            Clock::duration verdict_after)
      : inner_(std::move(inner)), cut_(cut), garbles_(garbles), verdict_after_(verdict_after) {}

  const transport::Topology& topology() const override { return inner_->topology(); }
  Status allgather(const Bytes& mine, std::vector<Bytes>* all) override {
    KOLO_RETURN_IF_ERROR(check_peers());
    return inner_->allgather(mine, all);
  }
  Status gather(const Bytes& mine, std::vector<Bytes>* all, int root) override {
    KOLO_RETURN_IF_ERROR(check_peers());
    return inner_->gather(mine, all, root);
  }
  Status broadcast(Bytes* blob, int root) override {
    KOLO_RETURN_IF_ERROR(check_peers());
    return inner_->broadcast(blob, root);
  }
  Status bitwise_and(std::vector<uint64_t>* bits) override {
    if (garbles_ && cut_.happened()) {
      (*bits)[0] = 0;  // every flag set, the length's OR all ones
      return Status::OK();
    }
    KOLO_RETURN_IF_ERROR(check_peers());
    return inner_->bitwise_and(bits);
  }
  Status barrier() override {
    KOLO_RETURN_IF_ERROR(check_peers());
    return inner_->barrier();
  }
  Status ring(uint64_t cycle) override { return inner_->ring(cycle); }
  bool rung(uint64_t cycle) override { return inner_->rung(cycle); }
  void wait_for_ring(uint64_t cycle, std::chrono::microseconds timeout,
                     std::chrono::microseconds poll) override {
    inner_->wait_for_ring(cycle, timeout, poll);
  }
  void wake() override { inner_->wake(); }
  Status check_peers() override {
    if (!cut_.happened() || cut_.since() < verdict_after_) return Status::OK();
    transport::record_peer_failure();  // as a world's Liveness does
    return Status(Code::kRankFailed, "rank 1 failed (no word from it within the timeout)");
  }

 private:
  std::unique_ptr<transport::ControlPlane> inner_;
  const Cut& cut_;
  const bool garbles_;
  const Clock::duration verdict_after_;
};

TEST(BrokenCycle, GarbageInTheAndBeforeTheVerdictEndsWithTheVerdict) {
  Cut cut;
  Config config;
  config.peer_timeout_seconds = 2.0;
  // Rank 1 gives rank 0 up at the cut; rank 0's AND then comes back as garbage,
  // and its own liveness names rank 1 300 ms later.
  LoopbackJob job(2, config, 0, [&](std::vector<transport::World>* worlds) {
    for (int r = 0; r < 2; ++r) {
      auto& control = (*worlds)[r].control;
      control = std::make_unique<AfterACut>(std::move(control), cut, r == 0,
                                            std::chrono::milliseconds(r == 0 ? 300 : 0));
    }
  });
  // A healthy step first: the wrapper passes everything through.
  job.run([&](int rank, Runtime& rt) {
    float x = 1.0f;
    ASSERT_EQ(wait_code(submit(rt, "before", &x, &x, 1, DataType::kFloat32)), Code::kOk);
    EXPECT_EQ(x, 2.0f);
  });
  cut.now();
  float x = 1.0f;
  auto h = submit(job.rank(0), "after", &x, &x, 1, DataType::kFloat32);
  ASSERT_EQ(wait_code(h), Code::kRankFailed) << h->message();
  EXPECT_NE(h->message().find("rank 1"), std::string::npos) << h->message();
  EXPECT_GE(cut.since(), std::chrono::milliseconds(300));
  job.run([](int, Runtime& rt) { rt.shutdown(); });
}

}  // namespace
}  // namespace kolo::core
