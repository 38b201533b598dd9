// The loopback world: its control plane, point-to-point verbs and the reference
// "loopback" transport, with ranks as threads at world sizes 1..8.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <vector>

#include "tests/unit/algorithms/spawn.h"
#include "tests/unit/algorithms/values.h"
#include "transport/reduction.h"
#include "transports/loopback/loopback_world.h"

namespace kolo::loopback {
namespace {

using kolo::testing::spawn;
using transport::Bytes;
using transport::RequestId;

constexpr int kMaxRanks = 8;

// Rank r's blob in round k: r+k characters, so sizes differ (rank 0 round 0 is empty).
Bytes blob(int rank, int round) { return Bytes(rank + round, static_cast<char>('a' + rank)); }

TEST(LoopbackWorldTest, TopologyOfOneNodeAndOfPretendNodes) {
  auto one = create_worlds(5);
  for (int r = 0; r < 5; ++r) {
    const transport::Topology& t = one[r].control->topology();
    EXPECT_EQ(t.rank, r);
    EXPECT_EQ(t.size, 5);
    EXPECT_EQ(t.local_rank, r);
    EXPECT_EQ(t.local_size, 5);
    EXPECT_EQ(t.cross_rank, 0);
    EXPECT_EQ(t.cross_size, 1);
    EXPECT_EQ(one[r].p2p->rank(), r);
    EXPECT_EQ(one[r].p2p->size(), 5);
  }
  auto split = create_worlds(6, 2);
  for (int r = 0; r < 6; ++r) {
    const transport::Topology& t = split[r].control->topology();
    EXPECT_EQ(t.local_rank, r % 2);
    EXPECT_EQ(t.local_size, 2);
    EXPECT_EQ(t.cross_rank, r / 2);
    EXPECT_EQ(t.cross_size, 3);
  }
  auto uneven = create_worlds(5, 2);  // nodes {0,1} {2,3} {4}
  EXPECT_EQ(uneven[4].control->topology().local_size, 1);
  EXPECT_EQ(uneven[4].control->topology().cross_rank, 2);
  EXPECT_EQ(uneven[3].control->topology().local_size, 2);
  EXPECT_EQ(uneven[0].control->topology().cross_size, 3);
}

TEST(LoopbackWorldTest, OffersLoopbackRingAndAdasum) {
  auto worlds = create_worlds(2);
  ASSERT_EQ(worlds[0].transports.size(), 3u);
  EXPECT_STREQ(worlds[0].transports[0]->name(), "loopback");
  EXPECT_STREQ(worlds[0].transports[1]->name(), "ring");
  EXPECT_STREQ(worlds[0].transports[2]->name(), "adasum");
}

// Many rounds back to back: generations must not mix.
TEST(LoopbackControlPlaneTest, AllgatherGatherBroadcastInRounds) {
  for (int size = 1; size <= kMaxRanks; ++size) {
    spawn(size, [&](int rank, transport::World& world) {
      transport::ControlPlane& cp = *world.control;
      for (int round = 0; round < 20; ++round) {
        std::vector<Bytes> all;
        ASSERT_TRUE(cp.allgather(blob(rank, round), &all).ok());
        ASSERT_EQ(all.size(), static_cast<size_t>(size));
        for (int r = 0; r < size; ++r) ASSERT_EQ(all[r], blob(r, round));

        const int root = round % size;
        std::vector<Bytes> gathered = {"stale"};
        ASSERT_TRUE(cp.gather(blob(rank, round), &gathered, root).ok());
        if (rank == root) {
          ASSERT_EQ(gathered.size(), static_cast<size_t>(size));
          for (int r = 0; r < size; ++r) ASSERT_EQ(gathered[r], blob(r, round));
        } else {
          ASSERT_TRUE(gathered.empty());
        }

        Bytes b = rank == root ? "from root " + std::to_string(root) : "junk";
        ASSERT_TRUE(cp.broadcast(&b, root).ok());
        ASSERT_EQ(b, "from root " + std::to_string(root));
      }
    });
  }
}

TEST(LoopbackControlPlaneTest, BitwiseAnd) {
  for (int size = 1; size <= kMaxRanks; ++size) {
    spawn(size, [&](int rank, transport::World& world) {
      // Word 0: every rank clears its own bit. Word 1: only rank 0 clears bit 63.
      std::vector<uint64_t> bits = {~(uint64_t{1} << rank),
                                    rank == 0 ? ~(uint64_t{1} << 63) : ~uint64_t{0}, 0};
      ASSERT_TRUE(world.control->bitwise_and(&bits).ok());
      const uint64_t cleared = (size == 64 ? ~uint64_t{0} : (uint64_t{1} << size) - 1);
      EXPECT_EQ(bits[0], ~cleared);
      EXPECT_EQ(bits[1], ~(uint64_t{1} << 63));
      EXPECT_EQ(bits[2], 0u);
    });
  }
}

TEST(LoopbackControlPlaneTest, BarrierHoldsEveryoneUntilAllArrive) {
  for (int size = 1; size <= kMaxRanks; ++size) {
    std::atomic<int> arrived{0};
    spawn(size, [&](int rank, transport::World& world) {
      for (int round = 1; round <= 50; ++round) {
        arrived.fetch_add(1);
        ASSERT_TRUE(world.control->barrier().ok());
        ASSERT_GE(arrived.load(), round * size);
        ASSERT_TRUE(world.control->barrier().ok());  // nobody starts round+1 early
      }
    });
    EXPECT_EQ(arrived.load(), 50 * size);
  }
}

TEST(LoopbackControlPlaneTest, DoorbellIsSeenByOtherRanks) {
  spawn(3, [&](int rank, transport::World& world) {
    transport::ControlPlane& cp = *world.control;
    EXPECT_FALSE(cp.rung(0));
    ASSERT_TRUE(cp.barrier().ok());
    if (rank == 1) {
      ASSERT_TRUE(cp.ring(5).ok());
    }
    ASSERT_TRUE(cp.barrier().ok());
    EXPECT_EQ(cp.rung(5), rank != 1);  // a rank's own ring does not count
    EXPECT_EQ(cp.rung(4), rank != 1);
    EXPECT_FALSE(cp.rung(6));
  });
}

TEST(LoopbackControlPlaneTest, DifferentCollectivesAtOnceIsAnError) {
  spawn(2, [&](int rank, transport::World& world) {
    std::vector<Bytes> all;
    const Status s = rank == 0 ? world.control->barrier() : world.control->allgather("x", &all);
    EXPECT_EQ(s.code(), Code::kInternal) << s.to_string();
  });
}

TEST(LoopbackPointToPointTest, SameTagArrivesInOrderTagsAreIndependent) {
  spawn(2, [&](int rank, transport::World& world) {
    transport::PointToPoint& p2p = *world.p2p;
    if (rank == 0) {
      int a = 1, b = 2, c = 3;
      RequestId ids[3];
      ASSERT_TRUE(p2p.isend(1, &a, sizeof a, 7, &ids[0]).ok());
      ASSERT_TRUE(p2p.isend(1, &b, sizeof b, 7, &ids[1]).ok());
      ASSERT_TRUE(p2p.isend(1, &c, sizeof c, 9, &ids[2]).ok());
      for (RequestId id : ids) ASSERT_TRUE(p2p.wait(id).ok());
    } else {
      int x = 0, y = 0, z = 0;
      RequestId rz, rx, ry;
      ASSERT_TRUE(p2p.irecv(0, &z, sizeof z, 9, &rz).ok());  // tag 9 first
      ASSERT_TRUE(p2p.irecv(0, &x, sizeof x, 7, &rx).ok());
      ASSERT_TRUE(p2p.irecv(0, &y, sizeof y, 7, &ry).ok());
      ASSERT_TRUE(p2p.wait(ry).ok());  // waited out of order, matched in order
      ASSERT_TRUE(p2p.wait(rx).ok());
      ASSERT_TRUE(p2p.wait(rz).ok());
      EXPECT_EQ(x, 1);
      EXPECT_EQ(y, 2);
      EXPECT_EQ(z, 3);
    }
  });
}

TEST(LoopbackPointToPointTest, TestReportsArrivalWithoutBlocking) {
  spawn(2, [&](int rank, transport::World& world) {
    transport::PointToPoint& p2p = *world.p2p;
    double v = 0;
    RequestId id;
    if (rank == 1) {
      ASSERT_TRUE(p2p.irecv(0, &v, sizeof v, 0, &id).ok());
      bool done = true;
      ASSERT_TRUE(p2p.test(id, &done).ok());
      EXPECT_FALSE(done);  // rank 0 sends only after the barrier
    }
    ASSERT_TRUE(world.control->barrier().ok());
    if (rank == 0) {
      v = 2.5;
      ASSERT_TRUE(p2p.isend(1, &v, sizeof v, 0, &id).ok());
      ASSERT_TRUE(p2p.wait(id).ok());
    }
    ASSERT_TRUE(world.control->barrier().ok());
    if (rank == 1) {
      bool done = false;
      ASSERT_TRUE(p2p.test(id, &done).ok());
      EXPECT_TRUE(done);
      ASSERT_TRUE(p2p.wait(id).ok());
      EXPECT_EQ(v, 2.5);
    }
  });
}

TEST(LoopbackPointToPointTest, SizeMismatchAndBadPeerAreErrors) {
  spawn(2, [&](int rank, transport::World& world) {
    transport::PointToPoint& p2p = *world.p2p;
    char buf[8] = {};
    RequestId id;
    if (rank == 0) {
      ASSERT_TRUE(p2p.isend(1, buf, 8, 0, &id).ok());
      ASSERT_TRUE(p2p.wait(id).ok());
      EXPECT_EQ(p2p.isend(2, buf, 8, 0, &id).code(), Code::kInvalidArgument);
    } else {
      ASSERT_TRUE(p2p.irecv(0, buf, 4, 0, &id).ok());
      EXPECT_EQ(p2p.wait(id).code(), Code::kTransport);
    }
  });
}

template <typename D>
class LoopbackTransportTest : public ::testing::Test {};
using Dtypes = ::testing::Types<testing::Float32Type, testing::Float16Type, testing::Int8Type,
                                testing::Int64Type>;
TYPED_TEST_SUITE(LoopbackTransportTest, Dtypes);

TYPED_TEST(LoopbackTransportTest, AllreduceEverySizeEveryOp) {
  using T = typename TypeParam::Storage;
  for (int size = 1; size <= kMaxRanks; ++size) {
    spawn(size, [&](int rank, transport::World& world) {
      transport::Transport* t = kolo::testing::find_transport(world, "loopback");
      ASSERT_NE(t, nullptr);
      for (int64_t count : {int64_t{0}, int64_t{1}, int64_t{size + 1}, int64_t{1000}}) {
        for (ReduceOp op : testing::kKernelOps) {
          for (bool in_place : {false, true}) {
            std::vector<T> in = testing::make_input<TypeParam>(op, rank, count);
            std::vector<T> out(static_cast<size_t>(count));
            transport::Bucket b = transport::host_bucket(
                in.data(), in_place ? in.data() : out.data(), count, TypeParam::kType,
                transport::Reduction{op});
            ASSERT_TRUE(t->supports(b).ok());
            auto work = t->allreduce(b);
            EXPECT_TRUE(work->test());
            ASSERT_TRUE(work->wait().ok());
            int64_t first = -1;
            EXPECT_EQ(
                testing::count_wrong<TypeParam>(static_cast<T*>(b.tensors[0].output), op, size, count, &first),
                0)
                << "size " << size << " count " << count << " " << op_name(op)
                << (in_place ? " in place" : "") << ", first wrong " << first;
          }
        }
      }
    });
  }
}

TEST(LoopbackTransportOnlyTest, RejectsDeviceMemory) {
  auto worlds = create_worlds(2);
  transport::Transport* t = kolo::testing::find_transport(worlds[0], "loopback");
  transport::Bucket b;
  b.count = 4;
  b.device.kind = DeviceKind::kCuda;
  EXPECT_EQ(t->supports(b).code(), Code::kUnsupported);
  b.device.kind = DeviceKind::kCpu;
  b.reduction.postscale = 0.5;  // factors go through the shared helper
  EXPECT_TRUE(t->supports(b).ok());
}

TEST(LoopbackTransportOnlyTest, DifferentCountsAcrossRanksAreAnError) {
  spawn(3, [&](int rank, transport::World& world) {
    std::vector<float> data(10 + (rank == 2 ? 1 : 0), 1.0f);
    transport::Bucket b = transport::host_bucket(data.data(), data.data(),
                                                 static_cast<int64_t>(data.size()), DataType::kFloat32);
    const Status s = kolo::testing::find_transport(world, "loopback")->allreduce(b)->wait();
    EXPECT_EQ(s.code(), Code::kInternal) << s.to_string();
  });
}

}  // namespace
}  // namespace kolo::loopback
