// The "mpi" transport's allgather, broadcast, alltoall and reducescatter under
// mpiexec -n 2, 3, 4: one fixture typed over dtypes; counts that differ per rank,
// zeros included; every broadcast root, in place and not; reducescatter shards not
// divisible by the world size with every op; the INT_MAX paths with a lowered
// limit. Values are small integers, exact in every dtype, so results compare with
// ==. Every rank makes the same collective calls in the same order, so checks
// after a call are EXPECTs on counts of wrong elements, never early returns.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "tests/multirank/mpi/allreduce_values.h"
#include "tests/multirank/mpi/collective_checks.h"
#include "tests/multirank/mpi/mpi_test_world.h"
#include "transports/mpi/mpi_transport.h"

namespace kolo::mpi {
namespace {

using namespace testing;  // NOLINT: the test helpers
using transport::CollectiveView;

template <typename T>
class MpiCollectivesTest : public ::testing::Test {
 protected:
  transport::Transport& mpi() { return *find_transport("mpi"); }
};

using Dtypes = ::testing::Types<uint8_t, int8_t, int16_t, int32_t, int64_t, Float16, Bfloat16,
                                float, double, Bool>;
TYPED_TEST_SUITE(MpiCollectivesTest, Dtypes);

TYPED_TEST(MpiCollectivesTest, AllgatherConcatenatesInRankOrder) {
  for (int pattern = 0; pattern < 4; ++pattern) {
    for (bool in_place : {false, true}) {
      EXPECT_EQ(check_allgather<TypeParam>(this->mpi(), pattern, in_place), 0)
          << "pattern " << pattern << (in_place ? " in place" : "");
    }
  }
}

TYPED_TEST(MpiCollectivesTest, BroadcastFromEveryRootInPlaceAndNot) {
  for (int root = 0; root < size(); ++root) {
    for (int64_t count : {0, 1, 7, 1000}) {
      for (bool in_place : {true, false}) {
        EXPECT_EQ(check_broadcast<TypeParam>(this->mpi(), root, count, in_place), 0)
            << "root " << root << " count " << count << (in_place ? " in place" : "");
      }
    }
  }
}

TYPED_TEST(MpiCollectivesTest, AlltoallDeliversEveryPairsBlock) {
  for (int pattern = 0; pattern < 3; ++pattern) {
    auto counts = [pattern](int s, int d) { return pair_count(pattern, s, d); };
    EXPECT_EQ(check_alltoall<TypeParam>(this->mpi(), counts), 0) << "pattern " << pattern;
  }
}

TYPED_TEST(MpiCollectivesTest, ReducescatterEveryOpUnevenShards) {
  const int64_t n = size();
  for (ReduceOp op : kOps) {
    for (int64_t total : {int64_t{0}, int64_t{1}, n - 1, n + 1, int64_t{1001}}) {
      for (bool in_place : {false, true}) {
        EXPECT_EQ(check_reducescatter<TypeParam>(this->mpi(), op, total, in_place), 0)
            << op_name(op) << " total " << total << (in_place ? " in place" : "");
      }
    }
  }
}

// A limit of 8 elements per MPI call stands in for INT_MAX (Note [Counts above
// INT_MAX] in mpi_collectives.cc).
class MpiCollectivesLimitTest : public ::testing::Test {
 protected:
  static constexpr int64_t kLimit = 8;
  void SetUp() override {
    ASSERT_TRUE(MpiTransport::create(testing::dup_world_comms(), &small_, kLimit).ok());
  }
  std::unique_ptr<MpiTransport> small_;
};

TEST_F(MpiCollectivesLimitTest, BroadcastIsSplitIntoSlices) {
  for (int64_t count : {int64_t{8}, int64_t{9}, int64_t{20}}) {
    EXPECT_EQ(check_broadcast<int32_t>(*small_, size() - 1, count, false), 0) << count;
    EXPECT_EQ(check_broadcast<Float16>(*small_, 0, count, true), 0) << count;
  }
}

TEST_F(MpiCollectivesLimitTest, AllgatherAndAlltoallCountInBlocks) {
  // Counts 8, 16, 24, 32: above the limit only as displacements or counts, all
  // multiples of 8, so blocks of 8 elements fit.
  CollectiveView v = view_of<int32_t>(nullptr, nullptr);
  for (int r = 0; r < size(); ++r) v.recv_counts.push_back(8 * (r + 1));
  std::vector<int32_t> in(v.recv_counts[rank()]), out(8 * size() * (size() + 1) / 2, -1);
  for (size_t k = 0; k < in.size(); ++k) in[k] = rank() * 1000 + static_cast<int32_t>(k);
  v.input = in.data();
  v.output = out.data();
  EXPECT_TRUE(run(*small_, Collective::kAllgather, v).ok());
  int64_t wrong = 0, at = 0;
  for (int r = 0; r < size(); ++r) {
    for (int64_t k = 0; k < 8 * (r + 1); ++k) wrong += out[at++] != r * 1000 + k;
  }
  EXPECT_EQ(wrong, 0);
  // Pairs of 8 or 16: the send side and the receive side choose blocks alone.
  auto counts = [](int s, int d) -> int64_t { return 8 * (1 + (s + d) % 2); };
  EXPECT_EQ(check_alltoall<Bfloat16>(*small_, counts), 0);
  auto mixed = [](int s, int d) -> int64_t { return s == 0 ? 8 : (d == 0 ? 4 : 2); };
  EXPECT_EQ(check_alltoall<int8_t>(*small_, mixed), 0);
}

TEST_F(MpiCollectivesLimitTest, CountsThatNoBlockFitsAreUnsupportedEverywhere) {
  CollectiveView v = view_of<float>(nullptr, nullptr);
  v.recv_counts.assign(size(), 12);  // above 8, but blocks of 6 elements fit
  EXPECT_TRUE(small_->supports_collective(Collective::kAllgather, v).ok());
  v.recv_counts.assign(size(), 7);
  v.recv_counts[0] = 9;  // gcd 1: counts of 9 elements
  Status s = small_->supports_collective(Collective::kAllgather, v);
  EXPECT_EQ(s.code(), Code::kUnsupported) << s.to_string();
  EXPECT_NE(s.message().find("Counts above INT_MAX"), std::string::npos) << s.message();
  v.send_counts.assign(size(), 5);  // displacements up to 15, in blocks of 5: fits
  v.recv_counts.assign(size(), 5);
  v.recv_counts[0] = 7;  // gcd 1, displacements 0, 7, 12, 17: above 8 from 3 ranks on
  EXPECT_EQ(small_->supports_collective(Collective::kAlltoall, v).ok(), size() < 3);
  v.recv_counts = shards(kLimit, size());
  EXPECT_TRUE(small_->supports_collective(Collective::kReducescatter, v).ok());
  v.recv_counts = shards(kLimit + 1, size());  // 9 elements in all: too many for one call
  EXPECT_EQ(small_->supports_collective(Collective::kReducescatter, v).code(),
            Code::kUnsupported);
  EXPECT_EQ(small_->collective(Collective::kReducescatter, v)->wait().code(),
            Code::kUnsupported);
  // At the limit it runs.
  EXPECT_EQ(check_reducescatter<Float16>(*small_, ReduceOp::kSum, kLimit, false), 0);
}

TEST(MpiCollectives, SupportsCpuOnlyAndChecksItsArguments) {
  transport::Transport& t = *find_transport("mpi");
  CollectiveView v = view_of<float>(nullptr, nullptr);
  v.recv_counts.assign(size(), 0);
  v.send_counts.assign(size(), 0);
  for (Collective op : {Collective::kAllgather, Collective::kBroadcast,
                          Collective::kAlltoall, Collective::kReducescatter}) {
    EXPECT_TRUE(t.supports_collective(op, v).ok()) << collective_name(op);
  }
  CollectiveView average = v;
  average.reduction.op = ReduceOp::kAverage;  // decide_reduction never hands it over
  EXPECT_EQ(t.supports_collective(Collective::kReducescatter, average).code(),
            Code::kUnsupported);
  CollectiveView cuda = v;
  cuda.device.kind = DeviceKind::kCuda;
  EXPECT_EQ(t.supports_collective(Collective::kAllgather, cuda).code(), Code::kUnsupported);
  CollectiveView short_counts = v;
  short_counts.recv_counts.pop_back();
  EXPECT_EQ(t.supports_collective(Collective::kAllgather, short_counts).code(),
            Code::kInvalidArgument);
  CollectiveView bad_root = v;
  bad_root.root = size();
  EXPECT_EQ(t.supports_collective(Collective::kBroadcast, bad_root).code(),
            Code::kInvalidArgument);
  // Nothing moves anywhere, with null buffers: the calls still complete.
  for (Collective op : {Collective::kAllgather, Collective::kAlltoall,
                          Collective::kReducescatter, Collective::kBroadcast}) {
    Status s = t.collective(op, v)->wait();
    EXPECT_TRUE(s.ok()) << collective_name(op) << ": " << s.to_string();
  }
}

// Several collectives in flight at once, finished by polling test().
TEST(MpiCollectives, WorksInFlightTogetherCompleteByTest) {
  transport::Transport& t = *find_transport("mpi");
  std::vector<int64_t> value(1000, rank() == 1 ? 7 : 0), gathered(size());
  int64_t mine = rank() + 10;
  CollectiveView b = view_of<int64_t>(value.data(), value.data());
  b.count = 1000;
  b.root = 1;
  CollectiveView g = view_of<int64_t>(&mine, gathered.data());
  g.recv_counts.assign(size(), 1);
  auto first = t.collective(Collective::kBroadcast, b);
  auto second = t.collective(Collective::kAllgather, g);
  Waiter waiter;
  while (!(second->test() && first->test())) waiter.pause();
  EXPECT_TRUE(first->wait().ok());
  EXPECT_TRUE(second->wait().ok());
  EXPECT_EQ(std::count(value.begin(), value.end(), 7), 1000);
  for (int r = 0; r < size(); ++r) EXPECT_EQ(gathered[r], r + 10);
}

}  // namespace
}  // namespace kolo::mpi
