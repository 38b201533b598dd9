// ShmCarrier (transports/shm/carrier.h): the arithmetic of operations whose data
// rode with the AND, through the transport::Carrier face alone — every rank packs
// its part into its own slot, then every rank finishes the operation from all the
// slots — at 1..4 ranks, against results computed here directly: allreduce
// buckets (empty tensors among them, prescale and postscale), broadcast (only the
// root writes), allgather and alltoall with uneven and empty blocks,
// reducescatter with uneven shards; and the refusals (too large, not
// element-wise, a part past the slot's capacity).
#include "transports/shm/carrier.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "transport/reduction.h"

namespace kolo::shm {
namespace {

using transport::Bucket;
using transport::CollectiveView;

constexpr size_t kSlot = 4096;

// Rank r's value at element i: small integers, so sums and products are exact.
float value(int r, int64_t i) { return static_cast<float>(1 + (r + i) % 3 + r); }

struct Slots {
  explicit Slots(int n) : bytes(static_cast<size_t>(n), std::vector<char>(kSlot, 0x5a)) {}
  std::vector<const char*> carried() const {
    std::vector<const char*> out;
    for (const auto& b : bytes) out.push_back(b.data());
    return out;
  }
  std::vector<std::vector<char>> bytes;
};

class ShmCarrierTest : public ::testing::TestWithParam<int> {};

TEST_P(ShmCarrierTest, ABucketIsReducedInRankOrderWithItsFactors) {
  const int n = GetParam();
  const std::vector<int64_t> counts = {3, 0, 5};  // an empty tensor between two
  std::vector<std::vector<std::vector<float>>> in(n), out(n);  // [rank][tensor]
  Slots slots(n);
  for (int r = 0; r < n; ++r) {
    Bucket b;
    b.dtype = DataType::kFloat32;
    b.reduction = transport::decide_reduction(ReduceOp::kSum, DataType::kFloat32, 2.0, 0.5, n);
    in[r].resize(counts.size());
    out[r].resize(counts.size());
    for (size_t t = 0; t < counts.size(); ++t) {
      for (int64_t i = 0; i < counts[t]; ++i) in[r][t].push_back(value(r, i + 10 * t));
      out[r][t].assign(counts[t], -1);
      b.tensors.push_back({in[r][t].data(), out[r][t].data(), counts[t], nullptr});
      b.count += counts[t];
    }
    ShmCarrier carrier(r);
    ASSERT_TRUE(carrier.fits(b, kSlot));
    carrier.pack(b, slots.bytes[r].data());
  }
  for (int r = 0; r < n; ++r) {
    Bucket b;
    b.dtype = DataType::kFloat32;
    b.reduction = transport::decide_reduction(ReduceOp::kSum, DataType::kFloat32, 2.0, 0.5, n);
    for (size_t t = 0; t < counts.size(); ++t)
      b.tensors.push_back({in[r][t].data(), out[r][t].data(), counts[t], nullptr});
    ShmCarrier(r).finish(b, slots.carried());
    for (size_t t = 0; t < counts.size(); ++t)
      for (int64_t i = 0; i < counts[t]; ++i) {
        float sum = 0;
        for (int p = 0; p < n; ++p) sum += 2 * value(p, i + 10 * t);
        EXPECT_EQ(out[r][t][i], sum * 0.5f) << "rank " << r << " tensor " << t << " element " << i;
      }
  }
}

TEST_P(ShmCarrierTest, ABucketThatIsTooLargeOrNotElementwiseDoesNotRide) {
  const int n = GetParam();
  std::vector<float> data(64, 1);
  Bucket b;
  b.dtype = DataType::kFloat32;
  b.reduction = transport::decide_reduction(ReduceOp::kMax, DataType::kFloat32, 1, 1, n);
  b.tensors.push_back({data.data(), data.data(), 64, nullptr});
  b.count = 64;
  ShmCarrier carrier(0);
  EXPECT_TRUE(carrier.fits(b, 256));
  EXPECT_FALSE(carrier.fits(b, 255));
  b.reduction.op = ReduceOp::kAdasum;
  EXPECT_FALSE(carrier.fits(b, 4096));
}

TEST_P(ShmCarrierTest, ABroadcastIsTheRootsDataAndOnlyTheRootWrites) {
  const int n = GetParam();
  const int root = n - 1;
  const int64_t count = 7;
  std::vector<std::vector<float>> buffers(n);
  Slots slots(n);
  for (int r = 0; r < n; ++r) {
    for (int64_t i = 0; i < count; ++i) buffers[r].push_back(r == root ? value(r, i) : -1);
    CollectiveView part;
    part.input = buffers[r].data();
    part.dtype = DataType::kFloat32;
    part.count = count;
    part.root = root;
    ASSERT_TRUE(ShmCarrier(r).pack(Collective::kBroadcast, part, slots.bytes[r].data(), kSlot, kSlot));
    if (r != root) EXPECT_EQ(slots.bytes[r][0], 0x5a) << "rank " << r << " is not the root";
  }
  for (int r = 0; r < n; ++r) {
    CollectiveView view;
    view.input = view.output = buffers[r].data();  // host broadcasts run in place
    view.dtype = DataType::kFloat32;
    view.count = count;
    view.root = root;
    ShmCarrier(r).finish(Collective::kBroadcast, view, slots.carried());
    for (int64_t i = 0; i < count; ++i) EXPECT_EQ(buffers[r][i], value(root, i)) << r << " " << i;
  }
}

TEST_P(ShmCarrierTest, AnAllgatherConcatenatesUnevenBlocksInRankOrder) {
  const int n = GetParam();
  auto rows = [](int r) { return static_cast<int64_t>(r % 3); };  // 0, 1, 2, 0 elements
  std::vector<std::vector<float>> in(n);
  Slots slots(n);
  int64_t total = 0;
  for (int r = 0; r < n; ++r) {
    for (int64_t i = 0; i < rows(r); ++i) in[r].push_back(value(r, i));
    total += rows(r);
    CollectiveView part;
    part.input = in[r].empty() ? nullptr : in[r].data();
    part.dtype = DataType::kFloat32;
    part.count = rows(r);
    ASSERT_TRUE(ShmCarrier(r).pack(Collective::kAllgather, part, slots.bytes[r].data(), kSlot, kSlot));
  }
  for (int r = 0; r < n; ++r) {
    std::vector<float> out(total + 1, -1);
    CollectiveView view;
    view.output = out.data();
    view.dtype = DataType::kFloat32;
    for (int p = 0; p < n; ++p) view.recv_counts.push_back(rows(p));
    ShmCarrier(r).finish(Collective::kAllgather, view, slots.carried());
    size_t at = 0;
    for (int p = 0; p < n; ++p)
      for (int64_t i = 0; i < rows(p); ++i) EXPECT_EQ(out[at++], value(p, i)) << r << " " << p;
    EXPECT_EQ(out[total], -1) << "wrote past its output";
  }
}

TEST_P(ShmCarrierTest, AnAlltoallFindsEachBlockByItsOffset) {
  const int n = GetParam();
  auto sends = [](int from, int to) { return static_cast<int64_t>((from + 2 * to) % 3); };
  auto element = [](int from, int to, int64_t i) { return static_cast<float>(100 * from + 10 * to + i); };
  std::vector<std::vector<float>> in(n);
  Slots slots(n);
  for (int r = 0; r < n; ++r) {
    CollectiveView part;
    part.dtype = DataType::kFloat32;
    for (int d = 0; d < n; ++d) {
      part.send_counts.push_back(sends(r, d));
      for (int64_t i = 0; i < sends(r, d); ++i) in[r].push_back(element(r, d, i));
    }
    part.input = in[r].empty() ? nullptr : in[r].data();
    ASSERT_TRUE(ShmCarrier(r).pack(Collective::kAlltoall, part, slots.bytes[r].data(), kSlot, kSlot));
    // The data counts against the limit; the offsets too against the capacity.
    const size_t data = in[r].size() * sizeof(float);
    const size_t header = static_cast<size_t>(n) * sizeof(int64_t);
    std::vector<char> other(kSlot);
    if (data > 0) EXPECT_FALSE(ShmCarrier(r).pack(Collective::kAlltoall, part, other.data(), data - 1, kSlot));
    EXPECT_FALSE(ShmCarrier(r).pack(Collective::kAlltoall, part, other.data(), kSlot, header + data - 1));
  }
  for (int r = 0; r < n; ++r) {
    std::vector<float> out;
    CollectiveView view;
    view.dtype = DataType::kFloat32;
    for (int s = 0; s < n; ++s) view.recv_counts.push_back(sends(s, r));
    int64_t total = 0;
    for (int64_t c : view.recv_counts) total += c;
    out.assign(total, -1);
    view.output = out.data();
    ShmCarrier(r).finish(Collective::kAlltoall, view, slots.carried());
    size_t at = 0;
    for (int s = 0; s < n; ++s)
      for (int64_t i = 0; i < sends(s, r); ++i)
        EXPECT_EQ(out[at++], element(s, r, i)) << "rank " << r << " from " << s;
  }
}

TEST_P(ShmCarrierTest, AReducescatterReducesEachRanksShard) {
  const int n = GetParam();
  const int64_t count = 2 * n + 1;  // not divisible by the world size
  std::vector<int64_t> shard;
  for (int r = 0; r < n; ++r) shard.push_back(count / n + (r < count % n ? 1 : 0));
  const transport::Reduction reduction =
      transport::decide_reduction(ReduceOp::kSum, DataType::kInt32, 3.0, 1.0, n);
  std::vector<std::vector<int32_t>> in(n);
  Slots slots(n);
  for (int r = 0; r < n; ++r) {
    for (int64_t i = 0; i < count; ++i) in[r].push_back(static_cast<int32_t>(value(r, i)));
    CollectiveView part;
    part.input = in[r].data();
    part.dtype = DataType::kInt32;
    part.count = count;
    part.reduction = reduction;
    ASSERT_TRUE(ShmCarrier(r).pack(Collective::kReducescatter, part, slots.bytes[r].data(), kSlot, kSlot));
  }
  int64_t first = 0;
  for (int r = 0; r < n; ++r) {
    std::vector<int32_t> out(shard[r] + 1, -1);
    CollectiveView view;
    view.dtype = DataType::kInt32;
    view.output = out.data();
    view.recv_counts = shard;
    view.reduction = reduction;
    ShmCarrier(r).finish(Collective::kReducescatter, view, slots.carried());
    for (int64_t i = 0; i < shard[r]; ++i) {
      int32_t sum = 0;
      for (int p = 0; p < n; ++p) sum += 3 * static_cast<int32_t>(value(p, first + i));
      EXPECT_EQ(out[i], sum) << "rank " << r << " element " << first + i;
    }
    EXPECT_EQ(out[shard[r]], -1) << "wrote past its shard";
    first += shard[r];
  }
  CollectiveView adasum;  // not element-wise: does not ride
  adasum.dtype = DataType::kInt32;
  adasum.count = 1;
  adasum.reduction.op = ReduceOp::kAdasum;
  std::vector<char> slot(kSlot);
  EXPECT_FALSE(ShmCarrier(0).pack(Collective::kReducescatter, adasum, slot.data(), kSlot, kSlot));
}

TEST(ShmCarrier, GroupsBarriersAndAllreducesDoNotRideAsCollectives) {
  std::vector<char> slot(kSlot);
  const CollectiveView part;
  for (Collective c : {Collective::kAllreduce, Collective::kGroupedAllgather, Collective::kBarrier,
                       Collective::kJoin})
    EXPECT_FALSE(ShmCarrier(0).pack(c, part, slot.data(), kSlot, kSlot)) << collective_name(c);
}

INSTANTIATE_TEST_SUITE_P(Ranks, ShmCarrierTest, ::testing::Values(1, 2, 3, 4));

}  // namespace
}  // namespace kolo::shm
