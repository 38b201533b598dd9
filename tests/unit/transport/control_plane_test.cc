// ControlPlane::wait_for_ring's default (a doorbell seen only by polling): naps
// that grow from 10 us to the poll interval (WaitFor::kRingPoll in
// common/wait_policy.h), ended by the timeout, a ring or a wake().
#include "transport/control_plane.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace kolo::transport {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::microseconds;
using std::chrono::milliseconds;

// Only the doorbell is real: rung() counts its calls and answers true from the
// `ring_at`-th on.
class PollingPlane : public ControlPlane {
 public:
  const Topology& topology() const override { return topology_; }
  Status allgather(const Bytes&, std::vector<Bytes>*) override { return Status::OK(); }
  Status gather(const Bytes&, std::vector<Bytes>*, int) override { return Status::OK(); }
  Status broadcast(Bytes*, int) override { return Status::OK(); }
  Status bitwise_and(std::vector<uint64_t>*) override { return Status::OK(); }
  Status barrier() override { return Status::OK(); }
  Status ring(uint64_t) override { return Status::OK(); }
  bool rung(uint64_t) override { return ++polls >= ring_at; }

  std::atomic<int> polls{0};
  int ring_at = 1 << 30;

 private:
  Topology topology_;
};

// 20 ms at a 1 ms poll interval: naps of 10, 20, ... 640 us, then 1 ms each, so
// a few dozen polls. Naps that did not grow (10 us each) would poll about 2,000
// times.
TEST(WaitForRing, NapsGrowToThePollIntervalUntilTheTimeout) {
  PollingPlane plane;
  const auto start = Clock::now();
  plane.wait_for_ring(0, milliseconds(20), milliseconds(1));
  EXPECT_GE(Clock::now() - start, milliseconds(20));
  EXPECT_GE(plane.polls.load(), 5);
  EXPECT_LT(plane.polls.load(), 100);
}

TEST(WaitForRing, ARingEndsTheWait) {
  PollingPlane plane;
  plane.ring_at = 3;
  const auto start = Clock::now();
  plane.wait_for_ring(0, std::chrono::seconds(60), milliseconds(1));
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(30));
  EXPECT_EQ(plane.polls.load(), 3);
}

TEST(WaitForRing, AWakeEndsTheWaitAndOneBeforeItIsKept) {
  PollingPlane plane;
  plane.wake();  // before the wait: the wait returns at once
  auto start = Clock::now();
  plane.wait_for_ring(0, std::chrono::seconds(60), std::chrono::seconds(10));
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(30));

  start = Clock::now();
  std::thread waker([&plane] {
    while (plane.polls.load() < 2) std::this_thread::yield();  // the wait has begun
    plane.wake();
  });
  plane.wait_for_ring(0, std::chrono::seconds(60), std::chrono::seconds(10));
  waker.join();
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(30)) << "the wake was lost";
}

}  // namespace
}  // namespace kolo::transport
