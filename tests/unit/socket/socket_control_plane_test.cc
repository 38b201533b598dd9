// The control plane over the socket world (transports/socket/socket_control_plane.h)
// at 2, 3 and 4 ranks: every collective, the doorbell, and process sets'
// planes on the same connections.
#include <gtest/gtest.h>

#include <atomic>

#include "tests/unit/socket/socket_job.h"

namespace kolo::socket {
namespace {

using testing::SocketJob;
using transport::Bytes;

class Planes : public ::testing::TestWithParam<int> {};

Bytes blob_of(int rank, int call) { return std::string(static_cast<size_t>(rank * 3 + call), 'a' + rank); }

TEST_P(Planes, EveryCollectiveAgreesOnEveryRank) {
  const int n = GetParam();
  SocketJob job;
  job.run_ok(n, [&](int r, transport::World& w) {
    transport::ControlPlane& c = *w.control;
    for (int call = 0; call < 3; ++call) {
      std::vector<Bytes> all;
      ASSERT_TRUE(c.allgather(blob_of(r, call), &all).ok());
      ASSERT_EQ(all.size(), static_cast<size_t>(n));
      for (int p = 0; p < n; ++p) EXPECT_EQ(all[p], blob_of(p, call));
      for (int root = 0; root < n; ++root) {
        ASSERT_TRUE(c.gather(blob_of(r, call), &all, root).ok());
        if (r == root) {
          ASSERT_EQ(all.size(), static_cast<size_t>(n));
          for (int p = 0; p < n; ++p) EXPECT_EQ(all[p], blob_of(p, call));
        } else {
          EXPECT_TRUE(all.empty());
        }
        Bytes b = r == root ? blob_of(root, call + 7) : "junk";
        ASSERT_TRUE(c.broadcast(&b, root).ok());
        EXPECT_EQ(b, blob_of(root, call + 7));
      }
      // Bit i*... is kept only where every rank set it: rank r clears bit r.
      std::vector<uint64_t> bits(3, ~uint64_t{0});
      bits[1] &= ~(uint64_t{1} << r);
      bits[2] = uint64_t{1} << (call + r);
      ASSERT_TRUE(c.bitwise_and(&bits).ok());
      EXPECT_EQ(bits[0], ~uint64_t{0});
      EXPECT_EQ(bits[1], ~uint64_t{0} << n);
      EXPECT_EQ(bits[2], n == 1 ? uint64_t{1} << call : 0u);
      std::vector<uint64_t> none;
      ASSERT_TRUE(c.bitwise_and(&none).ok());
      ASSERT_TRUE(c.barrier().ok());
    }
    EXPECT_TRUE(c.check_peers().ok());
  });
}

TEST_P(Planes, ABarrierHoldsEveryRankUntilTheLastArrives) {
  const int n = GetParam();
  SocketJob job;
  std::atomic<int> arrived{0};
  job.run_ok(n, [&](int r, transport::World& w) {
    if (r == n - 1) std::this_thread::sleep_for(std::chrono::milliseconds(200));
    arrived++;
    ASSERT_TRUE(w.control->barrier().ok());
    EXPECT_EQ(arrived.load(), n);
  });
}

TEST_P(Planes, TheDoorbellWakesIdleRanks) {
  const int n = GetParam();
  SocketJob job;
  job.run_ok(n, [&](int r, transport::World& w) {
    transport::ControlPlane& c = *w.control;
    EXPECT_FALSE(c.rung(1));
    ASSERT_TRUE(c.barrier().ok());
    if (r == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      ASSERT_TRUE(c.ring(5).ok());
    } else {
      const auto start = Clock::now();
      c.wait_for_ring(5, std::chrono::seconds(10), std::chrono::milliseconds(1));
      EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));
      EXPECT_TRUE(c.rung(5));
      EXPECT_TRUE(c.rung(4));
      EXPECT_FALSE(c.rung(6));
    }
    // wake() ends a wait from another thread.
    std::thread waker([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      c.wake();
    });
    const auto start = Clock::now();
    c.wait_for_ring(100, std::chrono::seconds(10), std::chrono::milliseconds(1));
    waker.join();
    EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));
    ASSERT_TRUE(c.barrier().ok());
  });
}

INSTANTIATE_TEST_SUITE_P(Socket, Planes, ::testing::Values(1, 2, 3, 4));

// Process sets {0,2} and {1,2,3} as channels over the world's connections; their
// collectives and point-to-point run beside the world's without meeting them.
TEST(SocketSets, SetsAreWorldsOnTheirOwnChannels) {
  SocketJob job;
  job.run(4, [](int, SocketWorldOptions* o) { o->test_node_size = 2; },
          [](int r, const Status& s, transport::World& w) {
    ASSERT_TRUE(s.ok()) << s.to_string();
    ASSERT_TRUE(w.make_subset);
    const std::vector<int> a{0, 2}, b{1, 2, 3};
    transport::World wa, wb;
    if (r == 0 || r == 2) ASSERT_TRUE(w.make_subset(1, a, &wa).ok());
    if (r >= 1) ASSERT_TRUE(w.make_subset(2, b, &wb).ok());
    for (auto* set : {&wa, &wb}) {
      if (!set->control) continue;
      const transport::Topology& t = set->control->topology();
      const std::vector<int>& members = set == &wa ? a : b;
      EXPECT_EQ(members[t.rank], r);
      EXPECT_EQ(t.size, static_cast<int>(members.size()));
      std::vector<Bytes> all;
      ASSERT_TRUE(set->control->allgather(std::to_string(r), &all).ok());
      for (size_t i = 0; i < members.size(); ++i) EXPECT_EQ(all[i], std::to_string(members[i]));
      // Point-to-point between the set's ranks 0 and 1.
      if (t.rank < 2) {
        int32_t v = r;
        transport::RequestId id;
        if (t.rank == 0) {
          ASSERT_TRUE(set->p2p->isend(1, &v, 4, 9, &id).ok());
        } else {
          ASSERT_TRUE(set->p2p->irecv(0, &v, 4, 9, &id).ok());
        }
        ASSERT_TRUE(set->p2p->wait(id).ok());
        EXPECT_EQ(v, members[0]);
      }
    }
    std::vector<Bytes> all;
    ASSERT_TRUE(w.control->allgather(std::to_string(r * 10), &all).ok());
    EXPECT_EQ(all[3], "30");
    ASSERT_TRUE(w.control->barrier().ok());
  });
}

}  // namespace
}  // namespace kolo::socket
