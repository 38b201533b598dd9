// The index math of the collectives over point-to-point verbs, for every world
// size up to 64: what one rank sends at a step is what its peer receives there,
// every block reaches every rank once, the tree reaches everyone once.
#include "algorithms/p2p_schedule.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <vector>

namespace kolo::algorithms {
namespace {

constexpr int kMaxSize = 64;

TEST(P2PScheduleTest, PrefixSums) {
  std::vector<int64_t> displs;
  EXPECT_EQ(prefix_sums({3, 0, 5, 1}, &displs), 9);
  EXPECT_EQ(displs, (std::vector<int64_t>{0, 3, 3, 8}));
  EXPECT_EQ(prefix_sums({}, &displs), 0);
  EXPECT_TRUE(displs.empty());
}

// Allgather (shift 0) and reduce-scatter (shift 1): at step 0 a rank sends
// first_send(), at step s+1 what it received at step s; its right neighbour
// receives exactly that at the same step.
TEST(P2PScheduleTest, RingPassSendsWhatTheRightNeighbourReceives) {
  for (int size = 1; size <= kMaxSize; ++size) {
    for (int shift : {0, 1}) {
      for (int r = 0; r < size; ++r) {
        const RingPass me(r, size, shift), right(me.right(), size, shift);
        EXPECT_EQ(right.left(), r);
        for (int s = 0; s < me.steps(); ++s) {
          const int sent = s == 0 ? me.first_send() : me.recv_block(s - 1);
          ASSERT_EQ(right.recv_block(s), sent) << "size " << size << " shift " << shift << " rank " << r;
        }
      }
    }
  }
}

TEST(P2PScheduleTest, AllgatherReceivesEveryOtherBlockOnce) {
  for (int size = 1; size <= kMaxSize; ++size) {
    for (int r = 0; r < size; ++r) {
      const RingPass pass(r, size, 0);
      EXPECT_EQ(pass.first_send(), r);
      std::set<int> got;
      for (int s = 0; s < pass.steps(); ++s) got.insert(pass.recv_block(s));
      EXPECT_EQ(got.size(), static_cast<size_t>(size - 1));
      EXPECT_EQ(got.count(r), 0u) << "size " << size << " rank " << r;
    }
  }
}

// Reduce-scatter: the last block a rank receives is its own, and by then it has
// passed through every rank: block b starts at rank b+1 (its first_send) and
// reaches rank b after size-1 hops, one per step.
TEST(P2PScheduleTest, ReduceScatterEndsWithTheOwnBlockAfterEveryRank) {
  for (int size = 2; size <= kMaxSize; ++size) {
    for (int r = 0; r < size; ++r) {
      const RingPass pass(r, size, 1);
      EXPECT_EQ(pass.recv_block(pass.steps() - 1), r) << "size " << size << " rank " << r;
      for (int s = 0; s < pass.steps(); ++s) {
        const int b = pass.recv_block(s);
        // Received at step s, the block carries the parts of the s + 1 ranks
        // from b + 1 to r - 1.
        EXPECT_EQ(pass.wrap(r - b - 1), s + 1) << "size " << size << " rank " << r << " step " << s;
      }
    }
  }
}

TEST(P2PScheduleTest, RelativeRanksRoundTrip) {
  for (int size = 1; size <= kMaxSize; ++size) {
    for (int root = 0; root < size; ++root) {
      EXPECT_EQ(relative_rank(root, root, size), 0);
      for (int r = 0; r < size; ++r) EXPECT_EQ(absolute_rank(relative_rank(r, root, size), root, size), r);
    }
  }
}

// Every non-root has one parent, which lists it as a child; a parent sends to
// its children one after the other, so v receives at round time(parent) + its
// place among the children, and the last rank receives at round ceil(log2 size).
TEST(P2PScheduleTest, BinomialTreeReachesEveryRankOnce) {
  for (int size = 1; size <= kMaxSize; ++size) {
    std::vector<int> parent_of(size, -1), round(size, 0);
    int last = 0;
    for (int v = 0; v < size; ++v) {  // parents come before their children
      const std::vector<int> children = tree_children(v, size);
      for (size_t i = 0; i < children.size(); ++i) {
        const int c = children[i];
        ASSERT_GT(c, v);
        ASSERT_LT(c, size);
        ASSERT_EQ(parent_of[c], -1) << "size " << size << ": " << c << " has two parents";
        parent_of[c] = v;
        round[c] = round[v] + static_cast<int>(i) + 1;
        last = std::max(last, round[c]);
      }
    }
    for (int v = 1; v < size; ++v) ASSERT_EQ(parent_of[v], tree_parent(v)) << "size " << size << " v " << v;
    int log = 0;
    while ((1 << log) < size) ++log;
    EXPECT_EQ(last, log) << "size " << size;
    // The largest subtree first: children in decreasing order.
    for (int v = 0; v < size; ++v) {
      const std::vector<int> c = tree_children(v, size);
      for (size_t i = 1; i < c.size(); ++i) EXPECT_GT(c[i - 1], c[i]);
    }
  }
}

// Note [Tree or chain]: the chain from (n-2)/(ceil(log2 n)-1) segments up.
TEST(P2PScheduleTest, BroadcastByChainWhereTheModelSays) {
  const size_t s = 1000;
  for (size_t bytes : {size_t{0}, size_t{1}, s, 100 * s, SIZE_MAX}) EXPECT_FALSE(broadcast_by_chain(bytes, 2, s));
  EXPECT_FALSE(broadcast_by_chain(s, 3, s));
  EXPECT_TRUE(broadcast_by_chain(s + 1, 3, s));
  EXPECT_FALSE(broadcast_by_chain(2 * s, 4, s));
  EXPECT_TRUE(broadcast_by_chain(2 * s + 1, 4, s));
  EXPECT_FALSE(broadcast_by_chain(3 * s / 2, 5, s));
  EXPECT_TRUE(broadcast_by_chain(3 * s / 2 + 1, 5, s));
  EXPECT_FALSE(broadcast_by_chain(3 * s, 8, s));
  EXPECT_TRUE(broadcast_by_chain(3 * s + 1, 8, s));
  EXPECT_TRUE(broadcast_by_chain(SIZE_MAX, 64, s));  // no overflow
  for (int n = 3; n <= kMaxSize; ++n) EXPECT_FALSE(broadcast_by_chain(s, n, s)) << n;  // one segment: the tree
}

TEST(P2PScheduleTest, PairwiseExchangeMeetsEveryOrderedPairOnce) {
  for (int size = 1; size <= kMaxSize; ++size) {
    std::set<std::pair<int, int>> met;
    for (int k = 1; k < size; ++k) {
      for (int r = 0; r < size; ++r) {
        const int to = pairwise_to(r, size, k);
        ASSERT_NE(to, r);
        EXPECT_EQ(pairwise_from(to, size, k), r);  // the peer receives from r at step k
        EXPECT_TRUE(met.insert({r, to}).second);
      }
    }
    EXPECT_EQ(met.size(), static_cast<size_t>(size) * (size - 1));
  }
}

}  // namespace
}  // namespace kolo::algorithms
