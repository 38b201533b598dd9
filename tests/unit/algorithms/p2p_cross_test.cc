// P2PCross: who is in the cross group, and the cross-node step's collectives on
// loopback worlds split into pretend nodes, with the world's own ring running
// on the same verbs between them.
#include "algorithms/p2p_cross.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <vector>

#include "algorithms/tags.h"
#include "transport/reduction.h"
#include "tests/unit/algorithms/spawn.h"

namespace kolo::algorithms {
namespace {

using transport::Topology;

Topology topo(int local, int node) {
  Topology t;
  t.local_rank = local;
  t.cross_rank = node;
  return t;
}

TEST(P2PCrossTest, MembersAreTheRanksWithTheSameLocalRankInNodeOrder) {
  // Round-robin placement: rank r on node r % 2, local rank r / 2.
  const std::vector<Topology> rr = {topo(0, 0), topo(0, 1), topo(1, 0), topo(1, 1), topo(2, 0), topo(2, 1)};
  std::vector<int> m;
  ASSERT_TRUE(P2PCross::cross_members(rr, 4, &m).ok());
  EXPECT_EQ(m, (std::vector<int>{4, 5}));
  // Nodes listed out of order: members still in node order.
  const std::vector<Topology> shuffled = {topo(0, 2), topo(0, 0), topo(1, 0), topo(0, 1)};
  ASSERT_TRUE(P2PCross::cross_members(shuffled, 0, &m).ok());
  EXPECT_EQ(m, (std::vector<int>{1, 3, 0}));
  ASSERT_TRUE(P2PCross::cross_members(shuffled, 2, &m).ok());
  EXPECT_EQ(m, (std::vector<int>{2}));
  const std::vector<Topology> twice = {topo(0, 0), topo(0, 0)};
  Status s = P2PCross::cross_members(twice, 1, &m);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("both have local rank 0 on node 0"), std::string::npos) << s.message();
}

int32_t value(int world_rank, int64_t i) { return world_rank * 10000 + static_cast<int32_t>(i % 1000); }

// Each rank's cross step, as a hierarchical transport would run it, checked
// against what its group (the ranks r with r % l == this rank's, consecutive
// pretend nodes of l ranks) must give.
void cross_step(int rank, int size, int l, transport::World& world) {
  std::unique_ptr<P2PCross> cross;
  ASSERT_TRUE(P2PCross::create(*world.control, *world.p2p, 1, RingOptions{64}, &cross).ok());
  std::vector<int> group;
  for (int r = rank % l; r < size; r += l) group.push_back(r);
  const int c = static_cast<int>(group.size());
  ASSERT_EQ(cross->size(), c);
  ASSERT_EQ(cross->rank(), rank / l);
  transport::Transport* ring = kolo::testing::find_transport(world, "ring");
  ASSERT_NE(ring, nullptr);
  for (int round = 0; round < 3; ++round) {
    // The world's ring between the cross steps, on the same verbs.
    std::vector<int64_t> w(777, rank + round);
    auto b = transport::host_bucket(w.data(), w.data(), 777, DataType::kInt64);
    EXPECT_TRUE(ring->allreduce(b)->wait().ok());
    EXPECT_EQ(w[776], static_cast<int64_t>(size) * (size - 1) / 2 + int64_t{size} * round);

    const int64_t n = 500 + round;
    std::vector<int32_t> data(n);
    for (int64_t i = 0; i < n; ++i) data[i] = value(rank, i);
    EXPECT_TRUE(cross->allreduce(data.data(), n, DataType::kInt32, ReduceOp::kSum).ok());
    int64_t wrong = 0;
    for (int64_t i = 0; i < n; ++i) {
      int32_t want = 0;
      for (int r : group) want += value(r, i);
      wrong += data[i] != want;
    }
    EXPECT_EQ(wrong, 0) << "allreduce, rank " << rank;

    // Allgather into a world-shaped layout: group member m's block at world rank
    // group[m]'s place, the other ranks' places untouched (as hierarchical's).
    std::vector<int64_t> counts, displs;
    for (int m = 0; m < c; ++m) counts.push_back(40 + group[m]), displs.push_back(group[m] * 100);
    std::vector<int32_t> out(size * 100, -1);
    for (int64_t k = 0; k < counts[rank / l]; ++k) out[rank * 100 + k] = value(rank, k);
    EXPECT_TRUE(cross->allgatherv(out.data() + rank * 100, out.data(), counts, displs, DataType::kInt32)->wait().ok());
    wrong = 0;
    for (int r = 0; r < size; ++r)
      for (int64_t k = 0; k < 100; ++k) {
        const bool member = r % l == rank % l && k < 40 + r;
        wrong += out[r * 100 + k] != (member ? value(r, k) : -1);
      }
    EXPECT_EQ(wrong, 0) << "allgatherv, rank " << rank;

    std::vector<int32_t> bcast(3000, rank == group[round % c] ? 7 : 0);
    EXPECT_TRUE(cross->broadcast(bcast.data(), 3000, DataType::kInt32, round % c)->wait().ok());
    EXPECT_EQ(std::count(bcast.begin(), bcast.end(), 7), 3000) << "broadcast, rank " << rank;

    // Reducescatter of `c` blocks of 30 + m, MIN.
    std::vector<int64_t> rs_counts;
    int64_t total = 0;
    for (int m = 0; m < c; ++m) rs_counts.push_back(30 + m), total += 30 + m;
    std::vector<int32_t> in(total), mine(rs_counts[rank / l]);
    for (int64_t i = 0; i < total; ++i) in[i] = value(rank, i) * ((rank + i) % 2 ? 1 : -1);
    EXPECT_TRUE(cross->reducescatter(in.data(), mine.data(), rs_counts, DataType::kInt32, ReduceOp::kMin)->wait().ok());
    int64_t at = 0;
    for (int m = 0; m < rank / l; ++m) at += rs_counts[m];
    wrong = 0;
    for (size_t k = 0; k < mine.size(); ++k) {
      int32_t want = INT32_MAX;
      for (int r : group) want = std::min(want, value(r, at + k) * ((r + at + static_cast<int64_t>(k)) % 2 ? 1 : -1));
      wrong += mine[k] != want;
    }
    EXPECT_EQ(wrong, 0) << "reducescatter, rank " << rank;

    // Alltoall of bytes: 5 + m bytes to member m, each byte naming sender and m.
    std::vector<int64_t> sc, sd, rc, rd;
    int64_t st = 0, rt = 0;
    for (int m = 0; m < c; ++m) {
      sc.push_back(5 + m), sd.push_back(st), st += 5 + m;
      rc.push_back(5 + rank / l), rd.push_back(rt), rt += 5 + rank / l;
    }
    std::vector<uint8_t> a_in(st), a_out(rt);
    for (int m = 0; m < c; ++m)
      for (int64_t k = 0; k < sc[m]; ++k) a_in[sd[m] + k] = static_cast<uint8_t>(rank * 16 + m);
    EXPECT_TRUE(cross->alltoallv(a_in.data(), sc, sd, a_out.data(), rc, rd, DataType::kUint8)->wait().ok());
    wrong = 0;
    for (int m = 0; m < c; ++m)
      for (int64_t k = 0; k < rc[m]; ++k) wrong += a_out[rd[m] + k] != group[m] * 16 + rank / l;
    EXPECT_EQ(wrong, 0) << "alltoallv, rank " << rank;
  }
}

TEST(P2PCrossTest, CrossStepOnPretendNodesBesideTheWorldsRing) {
  struct Case {
    int size, node_size;
  };
  // Equal nodes, one rank per node, and a last node smaller than the others.
  for (const Case& k : {Case{4, 2}, Case{6, 3}, Case{6, 2}, Case{5, 1}, Case{8, 3}}) {
    kolo::testing::spawn(
        k.size, [&](int rank, transport::World& world) { cross_step(rank, k.size, k.node_size, world); },
        k.node_size);
  }
}

}  // namespace
}  // namespace kolo::algorithms
