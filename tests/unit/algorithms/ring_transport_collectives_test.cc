// The "ring" transport's allgather, broadcast, alltoall and reducescatter
// (P2PCollectives behind the Transport seam) on loopback worlds: what
// supports_collective answers, and reducescatter with the whole Reduction —
// prescale, postscale and the integer average's division — applied as the
// loopback reference transport applies it (both through scaled_reducescatter),
// compared element by element with it.
#include <gtest/gtest.h>

#include <vector>

#include "tests/unit/algorithms/spawn.h"
#include "tests/unit/algorithms/values.h"
#include "transport/reduction.h"

namespace kolo::algorithms {
namespace {

using kolo::testing::find_transport;
using kolo::testing::spawn;
using transport::CollectiveOp;
using transport::CollectiveView;

TEST(RingTransportCollectivesTest, SupportsHostCollectivesAndSaysWhyNot) {
  auto worlds = loopback::create_worlds(3);
  transport::Transport* ring = find_transport(worlds[0], "ring");
  ASSERT_NE(ring, nullptr);
  CollectiveView v;
  v.recv_counts = {1, 2, 3};
  v.send_counts = {3, 2, 1};
  for (CollectiveOp op : {CollectiveOp::kAllgather, CollectiveOp::kBroadcast, CollectiveOp::kAlltoall,
                          CollectiveOp::kReducescatter}) {
    EXPECT_TRUE(ring->supports_collective(op, v).ok()) << collective_name(op);
  }
  CollectiveView device = v;
  device.device.kind = DeviceKind::kCuda;
  Status s = ring->supports_collective(CollectiveOp::kAllgather, device);
  EXPECT_EQ(s.code(), Code::kUnsupported);
  EXPECT_NE(s.message().find("CPU memory only"), std::string::npos) << s.message();
  CollectiveView adasum = v;
  adasum.reduction.op = ReduceOp::kAdasum;
  EXPECT_EQ(ring->supports_collective(CollectiveOp::kReducescatter, adasum).code(), Code::kUnsupported);
  // Counts that are not one per rank: an error from both calls, never a crash
  // (and nothing sent: this lone rank's peers never come).
  CollectiveView short_counts = v;
  short_counts.recv_counts = {1, 2};
  EXPECT_EQ(ring->supports_collective(CollectiveOp::kReducescatter, short_counts).code(),
            Code::kInvalidArgument);
  short_counts.reduction.prescale = 2;
  EXPECT_EQ(ring->collective(CollectiveOp::kReducescatter, short_counts)->wait().code(),
            Code::kInvalidArgument);
}

template <typename D>
class RingTransportReducescatterTest : public ::testing::Test {};
using Dtypes = ::testing::Types<kolo::testing::Float32Type, kolo::testing::Float16Type,
                                kolo::testing::Bfloat16Type, kolo::testing::Int8Type,
                                kolo::testing::Int32Type, kolo::testing::Int64Type>;
TYPED_TEST_SUITE(RingTransportReducescatterTest, Dtypes);

// The ring's result equals the loopback reference's, element for element, for
// every factor the executor hands over (decide_reduction's AVERAGE included).
TYPED_TEST(RingTransportReducescatterTest, WholeReductionAsTheReferenceApplies) {
  using T = typename TypeParam::Storage;
  for (int n : {1, 2, 3, 5}) {
    std::vector<transport::Reduction> reductions = {
        transport::decide_reduction(ReduceOp::kSum, TypeParam::kType, 2.0, 0.25, n),
        transport::decide_reduction(ReduceOp::kAverage, TypeParam::kType, 1.0, 1.0, n),
        transport::decide_reduction(ReduceOp::kMax, TypeParam::kType, 2.0, 1.0, n)};
    spawn(n, [&](int rank, transport::World& world) {
      transport::Transport* ring = find_transport(world, "ring");
      transport::Transport* reference = find_transport(world, "loopback");
      ASSERT_NE(ring, nullptr);
      ASSERT_NE(reference, nullptr);
      for (const transport::Reduction& r : reductions) {
        CollectiveView v;
        v.dtype = TypeParam::kType;
        v.reduction = r;
        int64_t total = 0;
        for (int q = 0; q < n; ++q) v.recv_counts.push_back(40 + 13 * q), total += 40 + 13 * q;
        std::vector<T> in = kolo::testing::make_input<TypeParam>(r.op, rank, total);
        const std::vector<T> original = in;
        std::vector<T> got(v.recv_counts[rank]), want(v.recv_counts[rank]);
        v.input = in.data();
        v.output = got.data();
        EXPECT_TRUE(ring->collective(CollectiveOp::kReducescatter, v)->wait().ok());
        v.output = want.data();
        EXPECT_TRUE(reference->collective(CollectiveOp::kReducescatter, v)->wait().ok());
        EXPECT_TRUE(got == want) << "size " << n << " rank " << rank << " op " << op_name(r.op)
                                 << " prescale " << r.prescale << " postscale " << r.postscale
                                 << " divide " << r.divide;
        EXPECT_TRUE(in == original) << "the input was modified";
      }
    });
  }
}

// Through the transport, every collective once with uneven counts.
TEST(RingTransportCollectivesTest, EveryCollectiveThroughTheSeam) {
  const int n = 4;
  spawn(n, [&](int rank, transport::World& world) {
    transport::Transport* ring = find_transport(world, "ring");
    ASSERT_NE(ring, nullptr);
    const std::vector<int64_t> counts = {3, 0, 5, 2};
    CollectiveView v;
    v.dtype = DataType::kInt32;
    v.recv_counts = counts;
    std::vector<int32_t> mine(counts[rank], rank + 1), all(10, -1);
    v.input = mine.data();
    v.output = all.data();
    EXPECT_TRUE(ring->collective(CollectiveOp::kAllgather, v)->wait().ok());
    EXPECT_EQ(all, (std::vector<int32_t>{1, 1, 1, 3, 3, 3, 3, 3, 4, 4}));

    CollectiveView b;
    b.dtype = DataType::kInt32;
    b.count = 10;
    b.root = 2;
    std::vector<int32_t> data(10, rank == 2 ? 9 : 0);
    b.input = b.output = data.data();
    EXPECT_TRUE(ring->collective(CollectiveOp::kBroadcast, b)->wait().ok());
    EXPECT_EQ(data, std::vector<int32_t>(10, 9));

    CollectiveView a;
    a.dtype = DataType::kInt32;
    a.send_counts.assign(n, 1);
    a.recv_counts.assign(n, 1);
    std::vector<int32_t> in = {rank * 10, rank * 10 + 1, rank * 10 + 2, rank * 10 + 3}, out(n);
    a.input = in.data();
    a.output = out.data();
    EXPECT_TRUE(ring->collective(CollectiveOp::kAlltoall, a)->wait().ok());
    EXPECT_EQ(out, (std::vector<int32_t>{rank, 10 + rank, 20 + rank, 30 + rank}));
  });
}

}  // namespace
}  // namespace kolo::algorithms
