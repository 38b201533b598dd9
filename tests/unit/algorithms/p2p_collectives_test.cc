// kolo's collectives over point-to-point (algorithms/p2p_collectives.h), ranks as
// threads over the loopback world's verbs: 1 to 5 ranks, uneven and zero counts,
// every root, in-place input, factors; sums are exact.
#include "algorithms/p2p_collectives.h"

#include <gtest/gtest.h>

#include <numeric>

#include "tests/unit/algorithms/spawn.h"
#include "transport/reduction.h"

namespace kolo::algorithms {
namespace {

using transport::CollectiveOp;
using transport::CollectiveView;

// Rank r's element i, for every collective: distinct per rank and index.
int32_t value(int r, int64_t i) { return static_cast<int32_t>(1000 * r + i); }

std::vector<int64_t> counts_for(int n, int salt) {
  std::vector<int64_t> c(n);
  for (int r = 0; r < n; ++r) c[r] = (r * 7 + salt) % 5;  // zeros among them
  return c;
}

CollectiveView view_of(const void* in, void* out) {
  CollectiveView v;
  v.input = in;
  v.output = out;
  v.dtype = DataType::kInt32;
  return v;
}

class P2pSizes : public ::testing::TestWithParam<int> {};

TEST_P(P2pSizes, AllgatherGathersEveryBlockInPlaceOrNot) {
  const int n = GetParam();
  const std::vector<int64_t> counts = counts_for(n, 3);
  const int64_t total = std::accumulate(counts.begin(), counts.end(), int64_t{0});
  for (bool in_place : {false, true}) {
    testing::spawn(n, [&](int r, transport::World& w) {
      P2pCollectives c(*w.p2p);
      std::vector<int32_t> out(static_cast<size_t>(total), -1);
      const int64_t mine = std::accumulate(counts.begin(), counts.begin() + r, int64_t{0});
      std::vector<int32_t> in(static_cast<size_t>(counts[r]));
      for (int64_t i = 0; i < counts[r]; ++i) in[i] = value(r, i);
      if (in_place) std::copy(in.begin(), in.end(), out.begin() + mine);
      CollectiveView v = view_of(in_place ? static_cast<const void*>(out.data() + mine) : in.data(),
                                 out.data());
      v.recv_counts = counts;
      ASSERT_TRUE(c.run(CollectiveOp::kAllgather, v).ok());
      int64_t k = 0;
      for (int p = 0; p < n; ++p)
        for (int64_t i = 0; i < counts[p]; ++i) ASSERT_EQ(out[k++], value(p, i)) << p << " " << i;
    });
  }
}

TEST_P(P2pSizes, BroadcastFromEveryRoot) {
  const int n = GetParam();
  testing::spawn(n, [&](int r, transport::World& w) {
    P2pCollectives c(*w.p2p);
    for (int root = 0; root < n; ++root) {
      std::vector<int32_t> buf(1000, -1);
      if (r == root)
        for (int i = 0; i < 1000; ++i) buf[i] = value(root, i);
      CollectiveView v = view_of(buf.data(), buf.data());
      v.count = 1000;
      v.root = root;
      ASSERT_TRUE(c.run(CollectiveOp::kBroadcast, v).ok());
      for (int i = 0; i < 1000; ++i) ASSERT_EQ(buf[i], value(root, i));
    }
  });
}

TEST_P(P2pSizes, AlltoallWithUnevenSplits) {
  const int n = GetParam();
  // Rank s sends (s + d) % 3 elements to rank d.
  auto sent = [](int s, int d) { return int64_t{(s + d) % 3}; };
  testing::spawn(n, [&](int r, transport::World& w) {
    P2pCollectives c(*w.p2p);
    CollectiveView v;
    std::vector<int32_t> in, out;
    for (int d = 0; d < n; ++d) {
      v.send_counts.push_back(sent(r, d));
      v.recv_counts.push_back(sent(d, r));
      for (int64_t i = 0; i < sent(r, d); ++i) in.push_back(value(r, 100 * d + i));
    }
    out.assign(static_cast<size_t>(std::accumulate(v.recv_counts.begin(), v.recv_counts.end(), int64_t{0})), -1);
    v.input = in.data();
    v.output = out.data();
    v.dtype = DataType::kInt32;
    ASSERT_TRUE(c.run(CollectiveOp::kAlltoall, v).ok());
    size_t k = 0;
    for (int s = 0; s < n; ++s)
      for (int64_t i = 0; i < sent(s, r); ++i) ASSERT_EQ(out[k++], value(s, 100 * r + i));
  });
}

TEST_P(P2pSizes, ReducescatterSumsMaximaAndFactors) {
  const int n = GetParam();
  const std::vector<int64_t> counts = counts_for(n, 1);
  const int64_t total = std::accumulate(counts.begin(), counts.end(), int64_t{0});
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax}) {
    for (double post : {1.0, 2.0}) {
      testing::spawn(n, [&](int r, transport::World& w) {
        P2pCollectives c(*w.p2p);
        std::vector<int32_t> in(static_cast<size_t>(total));
        for (int64_t i = 0; i < total; ++i) in[i] = value(r, i);
        std::vector<int32_t> out(static_cast<size_t>(counts[r]), -1);
        CollectiveView v = view_of(in.data(), out.data());
        v.recv_counts = counts;
        v.reduction.op = op;
        v.reduction.postscale = post;
        ASSERT_TRUE(P2pCollectives::supports(CollectiveOp::kReducescatter, v).ok());
        ASSERT_TRUE(c.run(CollectiveOp::kReducescatter, v).ok());
        const int64_t first = std::accumulate(counts.begin(), counts.begin() + r, int64_t{0});
        for (int64_t i = 0; i < counts[r]; ++i) {
          int64_t want = op == ReduceOp::kSum ? 0 : value(0, first + i);
          for (int p = 0; p < n; ++p)
            want = op == ReduceOp::kSum ? want + value(p, first + i) : std::max<int64_t>(want, value(p, first + i));
          ASSERT_EQ(out[i], static_cast<int32_t>(want * post)) << "rank " << r << " i " << i;
        }
      });
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Loopback, P2pSizes, ::testing::Values(1, 2, 3, 4, 5));

TEST(P2pCollectives, DeviceMemoryAndAdasumAreNotSupported) {
  CollectiveView v;
  v.device.kind = DeviceKind::kCuda;
  EXPECT_EQ(P2pCollectives::supports(CollectiveOp::kAllgather, v).code(), Code::kUnsupported);
  v.device.kind = DeviceKind::kCpu;
  v.reduction.op = ReduceOp::kAdasum;
  EXPECT_EQ(P2pCollectives::supports(CollectiveOp::kReducescatter, v).code(), Code::kUnsupported);
}

}  // namespace
}  // namespace kolo::algorithms
