// The node layer's seam in the socket control plane (transports/socket/node_seam.h):
// given a node AND and doorbell, a plane whose ranks are all on this host ANDs and
// rings through them, and carries bytes with the AND; without them, it uses the
// sockets. Fakes stand in for transports/shm, ranks are threads.
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>

#include "tests/unit/socket/socket_job.h"
#include "transports/socket/socket_control_plane.h"

namespace kolo::socket {
namespace {

using testing::SocketJob;

// What the fake node layer's ranks share.
struct Shared {
  std::mutex mu;
  std::condition_variable cv;
  int size = 2;
  uint64_t round = 0;
  int arrived = 0;
  std::vector<uint64_t> acc;
  std::vector<uint64_t> result;
  std::vector<std::string> carried = std::vector<std::string>(2);
  uint64_t rung = 0;
  int and_calls = 0, rings = 0;
};

class FakeAnd : public NodeAnd {
 public:
  FakeAnd(Shared& s, int rank) : s_(s), rank_(rank), slot_(64, '\0') {}
  size_t max_words() const override { return 8; }
  size_t carry_bytes(size_t, bool) const override { return slot_.size(); }
  char* carry_slot(size_t, bool) override { return slot_.data(); }
  bool unanimous() const override { return true; }
  const char* carried(int local_rank) const override { return s_.carried[local_rank].data(); }
  Status run(std::vector<uint64_t>* bits) override {
    std::unique_lock<std::mutex> lock(s_.mu);
    const uint64_t round = s_.round;
    if (s_.arrived == 0) s_.acc.assign(bits->size(), ~uint64_t{0});
    for (size_t i = 0; i < bits->size(); ++i) s_.acc[i] &= (*bits)[i];
    s_.carried[rank_] = slot_;
    ++s_.and_calls;
    if (++s_.arrived == s_.size) {
      s_.result = s_.acc;
      s_.arrived = 0;
      ++s_.round;
      s_.cv.notify_all();
    } else {
      s_.cv.wait(lock, [&] { return s_.round != round; });
    }
    *bits = s_.result;
    return Status::OK();
  }

 private:
  Shared& s_;
  int rank_;
  std::string slot_;
};

class FakeDoorbell : public NodeDoorbell {
 public:
  explicit FakeDoorbell(Shared& s) : s_(s) {}
  void ring(uint64_t cycle) override {
    std::lock_guard<std::mutex> lock(s_.mu);
    s_.rung = std::max(s_.rung, cycle);
    ++s_.rings;
    s_.cv.notify_all();
  }
  bool rung(uint64_t cycle) const override {
    std::lock_guard<std::mutex> lock(s_.mu);
    return s_.rung >= cycle;
  }
  void wait(uint64_t cycle, std::chrono::microseconds timeout,
            const std::function<bool()>& also) override {
    std::unique_lock<std::mutex> lock(s_.mu);
    s_.cv.wait_for(lock, timeout, [&] { return s_.rung >= cycle; });
  }
  void wake() override {}

 private:
  Shared& s_;
};

TEST(NodeSeam, APlaneOnOneHostAndsAndRingsThroughTheNodeLayer) {
  SocketJob job;
  Shared shared;
  job.run_ok(2, [&](int r, transport::World& w) {
    auto* world_plane = dynamic_cast<SocketControlPlane*>(w.control.get());
    ASSERT_NE(world_plane, nullptr);
    NodeServices node;
    node.node_and = std::make_unique<FakeAnd>(shared, r);
    node.doorbell = std::make_unique<FakeDoorbell>(shared);
    node.on_host = {true, true};
    SocketControlPlane plane(world_plane->engine(), 77, {0, 1}, w.control->topology(),
                             std::move(node));
    ASSERT_GE(plane.carry_capacity(4, false), 8u);
    std::memcpy(plane.carry_slot(1, false), r == 0 ? "zero" : "one", r == 0 ? 5 : 4);
    std::vector<uint64_t> bits{~uint64_t{0} ^ (uint64_t{1} << r)};
    ASSERT_TRUE(plane.bitwise_and(&bits).ok());
    EXPECT_EQ(bits[0], ~uint64_t{3});
    EXPECT_TRUE(plane.unanimous());
    EXPECT_STREQ(plane.carried(0), "zero");
    EXPECT_STREQ(plane.carried(1), "one");
    // A vector longer than the node AND takes goes over the sockets.
    std::vector<uint64_t> long_bits(9, ~uint64_t{0});
    ASSERT_TRUE(plane.bitwise_and(&long_bits).ok());
    EXPECT_FALSE(plane.unanimous());
    if (r == 0) {
      ASSERT_TRUE(plane.ring(3).ok());
    }
    plane.wait_for_ring(3, std::chrono::seconds(5), std::chrono::milliseconds(1));
    EXPECT_TRUE(plane.rung(3));
    ASSERT_TRUE(plane.barrier().ok());
  });
  EXPECT_EQ(shared.and_calls, 2);  // one call per rank: the long vector did not come here
  EXPECT_EQ(shared.rings, 1);
}

}  // namespace
}  // namespace kolo::socket
