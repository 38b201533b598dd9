// SubgroupP2P: rank and tag mapping against a recording fake, its argument
// checks, and groups that share one rank's verbs at once without crosstalk.
#include "algorithms/subgroup_p2p.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "algorithms/p2p_collectives.h"
#include "algorithms/ring_allreduce.h"
#include "algorithms/tags.h"
#include "tests/unit/algorithms/locked_p2p.h"
#include "tests/unit/algorithms/spawn.h"

namespace kolo::algorithms {
namespace {

using transport::RequestId;

// Records what reaches the world's verbs.
class RecordingP2P : public transport::PointToPoint {
 public:
  RecordingP2P(int rank, int size) : rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Status isend(int peer, const void*, size_t, int tag, RequestId* id) override {
    return record(true, peer, tag, id);
  }
  Status irecv(int peer, void*, size_t, int tag, RequestId* id) override {
    return record(false, peer, tag, id);
  }
  Status wait(RequestId id) override {
    waited.push_back(id);
    return Status::OK();
  }
  Status test(RequestId, bool* done) override {
    *done = true;
    return Status::OK();
  }

  struct Call {
    bool send;
    int peer, tag;
  };
  std::vector<Call> calls;
  std::vector<RequestId> waited;

 private:
  Status record(bool send, int peer, int tag, RequestId* id) {
    calls.push_back({send, peer, tag});
    *id = 100 + static_cast<RequestId>(calls.size());
    return Status::OK();
  }
  int rank_, size_;
};

TEST(SubgroupP2PTest, MapsRanksAndTagsAndPassesRequestsThrough) {
  RecordingP2P world(4, 8);
  std::unique_ptr<SubgroupP2P> group;
  ASSERT_TRUE(SubgroupP2P::create(world, {6, 4, 1}, 3, &group).ok());
  EXPECT_EQ(group->rank(), 1);
  EXPECT_EQ(group->size(), 3);
  RequestId a = 0, b = 0;
  ASSERT_TRUE(group->isend(0, nullptr, 0, tags::kRing, &a).ok());
  ASSERT_TRUE(group->irecv(2, nullptr, 0, tags::kTagsPerSpace - 1, &b).ok());
  ASSERT_EQ(world.calls.size(), 2u);
  EXPECT_TRUE(world.calls[0].send);
  EXPECT_EQ(world.calls[0].peer, 6);
  EXPECT_EQ(world.calls[0].tag, 3 * tags::kTagsPerSpace + tags::kRing);
  EXPECT_FALSE(world.calls[1].send);
  EXPECT_EQ(world.calls[1].peer, 1);
  EXPECT_EQ(world.calls[1].tag, 4 * tags::kTagsPerSpace - 1);
  EXPECT_EQ(a, 101);
  ASSERT_TRUE(group->wait(b).ok());
  EXPECT_EQ(world.waited, std::vector<RequestId>{b});
}

TEST(SubgroupP2PTest, RejectsBadPeersTagsMembersAndSpaces) {
  RecordingP2P world(2, 4);
  std::unique_ptr<SubgroupP2P> group;
  ASSERT_TRUE(SubgroupP2P::create(world, {0, 2}, 1, &group).ok());
  RequestId id = 0;
  EXPECT_EQ(group->isend(2, nullptr, 0, 1, &id).code(), Code::kInvalidArgument);
  EXPECT_EQ(group->irecv(-1, nullptr, 0, 1, &id).code(), Code::kInvalidArgument);
  EXPECT_EQ(group->isend(0, nullptr, 0, tags::kTagsPerSpace, &id).code(), Code::kInvalidArgument);
  EXPECT_EQ(group->irecv(0, nullptr, 0, -1, &id).code(), Code::kInvalidArgument);
  EXPECT_TRUE(world.calls.empty()) << "a rejected call reached the world's verbs";

  auto fails = [&](std::vector<int> members, int space, const char* says) {
    Status s = SubgroupP2P::create(world, members, space, &group);
    EXPECT_EQ(s.code(), Code::kInvalidArgument);
    EXPECT_NE(s.message().find(says), std::string::npos) << s.message();
  };
  fails({0, 1}, 1, "not among the members");
  fails({2, 2}, 1, "listed twice");
  fails({2, 4}, 1, "not a rank");
  fails({2}, 0, "tag space 0");
}

TEST(SubgroupP2PTest, AGroupOfAGroupIsFlattened) {
  RecordingP2P world(5, 8);
  std::unique_ptr<SubgroupP2P> set, cross;
  ASSERT_TRUE(SubgroupP2P::create(world, {1, 3, 5, 7}, 1, &set).ok());  // world 5 = set 2
  EXPECT_EQ(SubgroupP2P::create(*set, {0, 2}, 1, &cross).code(), Code::kInvalidArgument)
      << "the parent's own space must be refused";
  ASSERT_TRUE(SubgroupP2P::create(*set, {0, 2}, 2, &cross).ok());  // world 1 and 5
  EXPECT_EQ(cross->rank(), 1);
  RequestId id = 0;
  ASSERT_TRUE(cross->isend(0, nullptr, 0, 7, &id).ok());
  ASSERT_EQ(world.calls.size(), 1u);
  EXPECT_EQ(world.calls[0].peer, 1);
  EXPECT_EQ(world.calls[0].tag, 2 * tags::kTagsPerSpace + 7);
}

// --- crosstalk ----------------------------------------------------------------

// A value naming the group, the rank and the element.
int32_t value(int group, int rank, int64_t i) { return group * 100000 + rank * 1000 + static_cast<int32_t>(i % 997); }

// Runs every collective `rounds` times on `p2p` (group `group`'s ranks) and
// checks each result against the group's own values.
void run_suite(transport::PointToPoint& p2p, int group, int rounds) {
  const int n = p2p.size(), r = p2p.rank();
  RingAllreduce ring(p2p, RingOptions{256});
  P2PCollectives coll(p2p, RingOptions{256});
  const std::vector<int64_t> counts = [&] {
    std::vector<int64_t> c;
    for (int q = 0; q < n; ++q) c.push_back(300 + 11 * q + 7 * group);
    return c;
  }();
  std::vector<int64_t> displs;
  int64_t total = 0;
  for (int64_t c : counts) displs.push_back(total), total += c;
  for (int round = 0; round < rounds; ++round) {
    std::vector<int32_t> in(total), out(total);
    for (int64_t i = 0; i < total; ++i) in[i] = value(group, r, i);
    ASSERT_TRUE(ring.run(in.data(), out.data(), total, DataType::kInt32, ReduceOp::kSum).ok());
    for (int64_t i = 0; i < total; ++i) {
      int64_t want = 0;
      for (int q = 0; q < n; ++q) want += value(group, q, i);
      ASSERT_EQ(out[i], want) << "allreduce, group " << group << " rank " << r << " index " << i;
    }
    std::vector<int32_t> mine(counts[r]);
    for (int64_t k = 0; k < counts[r]; ++k) mine[k] = value(group, r, k);
    ASSERT_TRUE(coll.allgatherv(mine.data(), out.data(), counts, displs, DataType::kInt32).ok());
    for (int q = 0; q < n; ++q)
      for (int64_t k = 0; k < counts[q]; ++k)
        ASSERT_EQ(out[displs[q] + k], value(group, q, k)) << "allgather, group " << group;
    ASSERT_TRUE(coll.reducescatter(in.data(), out.data(), counts, DataType::kInt32, ReduceOp::kMax).ok());
    for (int64_t k = 0; k < counts[r]; ++k)
      ASSERT_EQ(out[k], value(group, n - 1, displs[r] + k)) << "reducescatter, group " << group;
    std::vector<int32_t> b(counts[0]);
    const int root = round % n;
    if (r == root)
      for (int64_t k = 0; k < counts[0]; ++k) b[k] = value(group, root, k);
    ASSERT_TRUE(coll.broadcast(b.data(), counts[0], DataType::kInt32, root).ok());
    for (int64_t k = 0; k < counts[0]; ++k) ASSERT_EQ(b[k], value(group, root, k)) << "broadcast";
    // Alltoall: rank r sends counts[d] elements value(group, r, d * 1000 + k) to d.
    std::vector<int64_t> send_counts(n), recv_counts(n, counts[r]), sdispls(n), rdispls(n);
    int64_t at = 0;
    for (int q = 0; q < n; ++q) send_counts[q] = counts[q], sdispls[q] = displs[q], rdispls[q] = at, at += counts[r];
    std::vector<int32_t> a_in(total), a_out(at);
    for (int q = 0; q < n; ++q)
      for (int64_t k = 0; k < counts[q]; ++k) a_in[displs[q] + k] = value(group, r, q * 50 + k);
    ASSERT_TRUE(coll.alltoallv(a_in.data(), send_counts, sdispls, a_out.data(), recv_counts, rdispls,
                               DataType::kInt32).ok());
    for (int q = 0; q < n; ++q)
      for (int64_t k = 0; k < counts[r]; ++k)
        ASSERT_EQ(a_out[rdispls[q] + k], value(group, q, r * 50 + k)) << "alltoall, group " << group;
  }
}

// Two overlapping groups and the whole world run every collective at the same
// time over each rank's one set of verbs: the same pairs of ranks, the same
// algorithm tags, only the spaces differ.
TEST(SubgroupP2PTest, TwoGroupsAndTheWorldAtOnceOnOneSetOfVerbs) {
  const std::vector<int> a = {0, 2, 4, 5}, b = {5, 4, 2, 1};
  kolo::testing::spawn(6, [&](int rank, transport::World& world) {
    kolo::testing::LockedP2P verbs(*world.p2p);
    std::vector<std::thread> threads;
    auto in = [rank](const std::vector<int>& g) { return std::find(g.begin(), g.end(), rank) != g.end(); };
    std::unique_ptr<SubgroupP2P> ga, gb;
    if (in(a)) {
      ASSERT_TRUE(SubgroupP2P::create(verbs, a, 1, &ga).ok());
    }
    if (in(b)) {
      ASSERT_TRUE(SubgroupP2P::create(verbs, b, 2, &gb).ok());
    }
    if (ga) threads.emplace_back([&] { run_suite(*ga, 1, 4); });
    if (gb) threads.emplace_back([&] { run_suite(*gb, 2, 4); });
    threads.emplace_back([&] { run_suite(verbs, 0, 4); });
    for (std::thread& t : threads) t.join();
  });
}

}  // namespace
}  // namespace kolo::algorithms
