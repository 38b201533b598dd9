// kolo's collectives over point-to-point verbs (P2PCollectives), with ranks as
// threads over the loopback world's verbs: world sizes 1..8, every dtype, block
// counts 0, 1, fewer elements than ranks, not divisible by the ranks, and large
// (many segments), in place and not; reducescatter with every kernel op. Values
// are exact in every dtype, so results compare with ==.
#include "algorithms/p2p_collectives.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "tests/unit/algorithms/spawn.h"
#include "tests/unit/algorithms/values.h"

namespace kolo::algorithms {
namespace {

using kolo::testing::spawn;
using transport::CollectiveOp;
using transport::CollectiveView;

constexpr int kMaxRanks = 8;
constexpr int kPatterns = 5;
// Small segments, so that the large pattern travels in many of them (and 40 is
// no multiple of 16, so some segments end mid-way of what a vector unit loads).
constexpr size_t kSmallSegment = 40;

// Rank r's block under pattern p at world size n.
int64_t block_count(int pattern, int r, int n) {
  switch (pattern) {
    case 0: return 0;                     // nothing anywhere
    case 1: return 1;                     // one each
    case 2: return r == n - 1 ? 1 : 0;    // fewer elements than ranks
    case 3: return (r * 3 + 1) % 4;       // uneven, some zero, total not divisible
    default: return 700 + 37 * r;         // large: many segments
  }
}

std::vector<int64_t> block_counts(int pattern, int n) {
  std::vector<int64_t> c;
  for (int r = 0; r < n; ++r) c.push_back(block_count(pattern, r, n));
  return c;
}

std::vector<int64_t> displacements(const std::vector<int64_t>& counts) {
  std::vector<int64_t> d(counts.size(), 0);
  for (size_t r = 1; r < counts.size(); ++r) d[r] = d[r - 1] + counts[r - 1];
  return d;
}

int64_t sum(const std::vector<int64_t>& v) { return std::accumulate(v.begin(), v.end(), int64_t{0}); }

// How many of got[0..count) differ from want(i); *first gets the first such i.
// Checks count instead of stopping at the first difference: a rank that left
// the loop early would leave its peers waiting for its next call.
template <typename T, typename Want>
int64_t mismatches(const T* got, int64_t count, Want want, int64_t* first) {
  int64_t wrong = 0;
  *first = -1;
  for (int64_t i = 0; i < count; ++i) {
    if (!(got[i] == want(i)) && wrong++ == 0) *first = i;
  }
  return wrong;
}

template <typename D>
class P2PCollectivesTest : public ::testing::Test {
 protected:
  using T = typename D::Storage;

  // A value that names its origin: rank `from`, destination `to`, element k.
  static T origin(int from, int to, int64_t k) {
    if (D::kWide) return D::from_double(from * 100000.0 + to * 1000.0 + static_cast<double>(k % 1000));
    const double v = static_cast<double>((from * 7 + to * 5 + k * 3) % 23);
    return D::from_double(D::kSigned ? v - 11 : v);
  }

  static CollectiveView view(const void* input, void* output) {
    CollectiveView v;
    v.input = input;
    v.output = output;
    v.dtype = D::kType;
    return v;
  }
};

using Dtypes = ::testing::Types<kolo::testing::Float32Type, kolo::testing::Float64Type,
                                kolo::testing::Float16Type, kolo::testing::Bfloat16Type,
                                kolo::testing::Int8Type, kolo::testing::Uint8Type,
                                kolo::testing::Int32Type, kolo::testing::Int64Type,
                                kolo::testing::PlainType<int16_t, DataType::kInt16, false, true>,
                                kolo::testing::PlainType<uint16_t, DataType::kUint16, false, false>>;
TYPED_TEST_SUITE(P2PCollectivesTest, Dtypes);

TYPED_TEST(P2PCollectivesTest, AllgatherEverySizeAndPatternInPlaceAndNot) {
  using T = typename TypeParam::Storage;
  for (int n = 1; n <= kMaxRanks; ++n) {
    spawn(n, [&](int rank, transport::World& world) {
      P2PCollectives coll(*world.p2p, RingOptions{kSmallSegment});
      for (int pattern = 0; pattern < kPatterns; ++pattern) {
        for (bool in_place : {false, true}) {
          const std::vector<int64_t> counts = block_counts(pattern, n), displs = displacements(counts);
          std::vector<T> out(sum(counts), TypeParam::from_double(99));
          std::vector<T> in(counts[rank]);
          for (int64_t k = 0; k < counts[rank]; ++k) {
            in[k] = this->origin(rank, 0, k);
            if (in_place) out[displs[rank] + k] = in[k];
          }
          CollectiveView v = this->view(in_place ? out.data() + displs[rank] : in.data(), out.data());
          v.recv_counts = block_counts(pattern, n);
          const Status s = coll.run(CollectiveOp::kAllgather, v);
          EXPECT_TRUE(s.ok()) << s.to_string();
          for (int r = 0; r < n; ++r) {
            int64_t first = -1;
            EXPECT_EQ(mismatches(out.data() + displs[r], counts[r],
                                 [&](int64_t k) { return this->origin(r, 0, k); }, &first), 0)
                << "size " << n << " pattern " << pattern << " rank " << rank << " block " << r
                << " first wrong element " << first << (in_place ? " in place" : "");
          }
        }
      }
    });
  }
}

// Blocks at displacements that are not the prefix sums (gaps, reversed order),
// as the cross-node step of the hierarchical transport hands them; the gaps
// must stay untouched.
TYPED_TEST(P2PCollectivesTest, AllgathervWithExplicitDisplacements) {
  using T = typename TypeParam::Storage;
  for (int n : {2, 3, 5}) {
    spawn(n, [&](int rank, transport::World& world) {
      P2PCollectives coll(*world.p2p, RingOptions{kSmallSegment});
      std::vector<int64_t> counts, displs(n);
      int64_t at = 0;
      for (int r = n - 1; r >= 0; --r) {  // reversed, with a gap of 3 before each block
        counts.insert(counts.begin(), 0);
        at += 3;
        displs[r] = at;
        at += 50 + 9 * r;
      }
      for (int r = 0; r < n; ++r) counts[r] = 50 + 9 * r;
      std::vector<T> out(at, TypeParam::from_double(99)), in(counts[rank]);
      for (int64_t k = 0; k < counts[rank]; ++k) in[k] = this->origin(rank, 1, k);
      EXPECT_TRUE(coll.allgatherv(in.data(), out.data(), counts, displs, TypeParam::kType).ok());
      std::vector<T> want(at, TypeParam::from_double(99));
      for (int r = 0; r < n; ++r)
        for (int64_t k = 0; k < counts[r]; ++k) want[displs[r] + k] = this->origin(r, 1, k);
      EXPECT_TRUE(out == want) << "size " << n << " rank " << rank;
    });
  }
}

TYPED_TEST(P2PCollectivesTest, BroadcastEveryRootTreeAndChainInPlaceAndNot) {
  using T = typename TypeParam::Storage;
  using Broadcast = P2PCollectives::Broadcast;
  for (int n = 1; n <= kMaxRanks; ++n) {
    spawn(n, [&](int rank, transport::World& world) {
      P2PCollectives coll(*world.p2p, RingOptions{kSmallSegment});
      for (int root = 0; root < n; ++root) {
        for (int64_t count : {int64_t{0}, int64_t{1}, int64_t{n - 1}, int64_t{1000}, int64_t{5000}}) {
          for (auto [how, in_place] : {std::pair{Broadcast::kTree, true}, std::pair{Broadcast::kChain, false},
                                       std::pair{Broadcast::kBySize, true}, std::pair{Broadcast::kBySize, false}}) {
            coll.set_broadcast(how);
            std::vector<T> out(count, TypeParam::from_double(99)), in(count, TypeParam::from_double(98));
            std::vector<T>& source = in_place ? out : in;
            if (rank == root)
              for (int64_t k = 0; k < count; ++k) source[k] = this->origin(root, 2, k);
            CollectiveView v = this->view(source.data(), out.data());
            v.count = count;
            v.root = root;
            const Status s = coll.run(CollectiveOp::kBroadcast, v);
            EXPECT_TRUE(s.ok()) << s.to_string();
            auto want = [&](int64_t k) { return this->origin(root, 2, k); };
            int64_t first = -1;
            EXPECT_EQ(mismatches(out.data(), count, want, &first), 0)
                << "size " << n << " root " << root << " count " << count << " rank " << rank
                << " first wrong element " << first;
            if (rank == root && !in_place) {
              EXPECT_EQ(mismatches(in.data(), count, want, &first), 0) << "the root's input changed";
            }
          }
        }
      }
    });
  }
}

// Rank s sends f(s, d) elements to rank d under pattern p.
int64_t pair_count(int pattern, int s, int d, int n) {
  switch (pattern) {
    case 0: return 0;
    case 1: return 1;
    case 2: return s == n - 1 && d == 0 ? 1 : 0;  // one element in the whole world
    case 3: return (s * 3 + d) % 4;
    default: return 300 + 17 * s + 5 * d;
  }
}

TYPED_TEST(P2PCollectivesTest, AlltoallEverySizeAndPattern) {
  using T = typename TypeParam::Storage;
  for (int n = 1; n <= kMaxRanks; ++n) {
    spawn(n, [&](int rank, transport::World& world) {
      P2PCollectives coll(*world.p2p, RingOptions{kSmallSegment});
      for (int pattern = 0; pattern < kPatterns; ++pattern) {
        CollectiveView v = this->view(nullptr, nullptr);
        for (int d = 0; d < n; ++d) v.send_counts.push_back(pair_count(pattern, rank, d, n));
        for (int s = 0; s < n; ++s) v.recv_counts.push_back(pair_count(pattern, s, rank, n));
        const std::vector<int64_t> sd = displacements(v.send_counts), rd = displacements(v.recv_counts);
        std::vector<T> in(sum(v.send_counts)), out(sum(v.recv_counts), TypeParam::from_double(99));
        for (int d = 0; d < n; ++d)
          for (int64_t k = 0; k < v.send_counts[d]; ++k) in[sd[d] + k] = this->origin(rank, d, k);
        v.input = in.data();
        v.output = out.data();
        const Status s = coll.run(CollectiveOp::kAlltoall, v);
        EXPECT_TRUE(s.ok()) << s.to_string();
        for (int src = 0; src < n; ++src) {
          int64_t first = -1;
          EXPECT_EQ(mismatches(out.data() + rd[src], v.recv_counts[src],
                               [&](int64_t k) { return this->origin(src, rank, k); }, &first), 0)
              << "size " << n << " pattern " << pattern << " rank " << rank << " from " << src
              << " first wrong element " << first;
        }
      }
    });
  }
}

// One buffer for input and output (equal layouts on both sides).
TYPED_TEST(P2PCollectivesTest, AlltoallInPlace) {
  using T = typename TypeParam::Storage;
  for (int n : {1, 2, 3, 4, 7}) {
    spawn(n, [&](int rank, transport::World& world) {
      P2PCollectives coll(*world.p2p, RingOptions{kSmallSegment});
      CollectiveView v = this->view(nullptr, nullptr);
      v.send_counts.assign(n, 33);
      v.recv_counts.assign(n, 33);
      std::vector<T> buf(33 * n);
      for (int d = 0; d < n; ++d)
        for (int64_t k = 0; k < 33; ++k) buf[d * 33 + k] = this->origin(rank, d, k);
      v.input = v.output = buf.data();
      EXPECT_TRUE(coll.run(CollectiveOp::kAlltoall, v).ok());
      for (int src = 0; src < n; ++src) {
        int64_t first = -1;
        EXPECT_EQ(mismatches(buf.data() + src * 33, 33,
                             [&](int64_t k) { return this->origin(src, rank, k); }, &first), 0)
            << "size " << n << " rank " << rank << " from " << src;
      }
    });
  }
}

TYPED_TEST(P2PCollectivesTest, ReducescatterEverySizePatternAndOp) {
  using T = typename TypeParam::Storage;
  for (int n = 1; n <= kMaxRanks; ++n) {
    spawn(n, [&](int rank, transport::World& world) {
      P2PCollectives coll(*world.p2p, RingOptions{kSmallSegment});
      for (int pattern = 0; pattern < kPatterns; ++pattern) {
        for (ReduceOp op : kolo::testing::kKernelOps) {
          for (bool in_place : {false, true}) {
            const std::vector<int64_t> counts = block_counts(pattern, n), displs = displacements(counts);
            std::vector<T> in = kolo::testing::make_input<TypeParam>(op, rank, sum(counts));
            const std::vector<T> original = in;
            std::vector<T> out(counts[rank], TypeParam::from_double(99));
            T* output = in_place ? in.data() : out.data();
            CollectiveView v = this->view(in.data(), output);
            v.recv_counts = block_counts(pattern, n);
            v.reduction.op = op;
            const Status s = coll.run(CollectiveOp::kReducescatter, v);
            EXPECT_TRUE(s.ok()) << s.to_string();
            std::vector<double> got(counts[rank]);
            for (int64_t k = 0; k < counts[rank]; ++k) got[k] = TypeParam::to_double(output[k]);
            int64_t first = -1;
            EXPECT_EQ(mismatches(got.data(), counts[rank],
                                 [&](int64_t k) {
                                   return kolo::testing::expected_value<TypeParam>(op, n, displs[rank] + k);
                                 },
                                 &first),
                      0)
                << "size " << n << " pattern " << pattern << " op " << op_name(op) << " rank " << rank
                << (in_place ? " in place" : "") << ", first wrong element " << first;
            if (!in_place) {
              EXPECT_TRUE(in == original) << "the input was modified";
            }
          }
        }
      }
    });
  }
}

// The default segment size, with blocks of several segments each.
TYPED_TEST(P2PCollectivesTest, LargeBlocksWithTheDefaultSegments) {
  using T = typename TypeParam::Storage;
  const int64_t per_rank = static_cast<int64_t>(3 * RingOptions{}.segment_bytes / sizeof(T)) + 5;
  for (int n : {2, 3}) {
    spawn(n, [&](int rank, transport::World& world) {
      P2PCollectives coll(*world.p2p);
      std::vector<int64_t> counts(n);
      for (int r = 0; r < n; ++r) counts[r] = per_rank + r;
      const std::vector<int64_t> displs = displacements(counts);
      std::vector<T> in = kolo::testing::make_input<TypeParam>(ReduceOp::kSum, rank, sum(counts));
      std::vector<T> out(counts[rank]);
      EXPECT_TRUE(coll.reducescatter(in.data(), out.data(), counts, TypeParam::kType, ReduceOp::kSum).ok());
      std::vector<T> all(sum(counts));
      EXPECT_TRUE(coll.allgatherv(out.data(), all.data(), counts, displs, TypeParam::kType).ok());
      std::vector<double> got(all.size());
      for (size_t i = 0; i < all.size(); ++i) got[i] = TypeParam::to_double(all[i]);
      int64_t first = -1;
      EXPECT_EQ(mismatches(got.data(), sum(counts),
                           [&](int64_t i) {
                             return kolo::testing::expected_value<TypeParam>(ReduceOp::kSum, n, i);
                           },
                           &first),
                0)
          << "the allgather of the reducescatter, size " << n << " rank " << rank
          << ", first wrong element " << first;
    });
  }
}

TEST(P2PCollectivesErrorTest, BadArgumentsFailBeforeAnythingIsSent) {
  // A lone rank of a 3-rank world: an error must come back before any message,
  // or this would wait for peers that never come.
  auto worlds = loopback::create_worlds(3);
  P2PCollectives coll(*worlds[0].p2p);
  float x[8] = {};
  const std::vector<int64_t> three = {1, 1, 1}, zeros = {0, 0, 0};
  auto invalid = [](const Status& s, const char* says) {
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.to_string();
    EXPECT_NE(s.message().find(says), std::string::npos) << s.message();
  };
  invalid(coll.allgatherv(x, x, {1, 1}, {0, 1}, DataType::kFloat32), "each of 3 ranks");
  invalid(coll.allgatherv(x, x, {1, -1, 1}, {0, 1, 2}, DataType::kFloat32), "each of 3 ranks");
  invalid(coll.allgatherv(nullptr, x, three, {0, 1, 2}, DataType::kFloat32), "input is null");
  invalid(coll.allgatherv(x, x, three, {0, 1, 2}, static_cast<DataType>(42)), "invalid dtype");
  invalid(coll.broadcast(x, 4, DataType::kFloat32, 3), "root 3");
  invalid(coll.broadcast(x, -1, DataType::kFloat32, 0), "count -1");
  invalid(coll.broadcast(nullptr, 4, DataType::kFloat32, 0), "null");
  invalid(coll.reducescatter(x, x, three, DataType::kFloat32, ReduceOp::kAverage), "op must be");
  invalid(coll.reducescatter(x, x, {3, 3}, DataType::kFloat32, ReduceOp::kSum), "each of 3 ranks");
  invalid(coll.reducescatter(nullptr, x, three, DataType::kFloat32, ReduceOp::kSum), "input is null");
  invalid(coll.alltoallv(x, {2, 1, 1}, {0, 2, 3}, x, {1, 1, 1}, {0, 1, 2}, DataType::kFloat32),
          "sends itself 2 elements but expects 1");
  invalid(coll.alltoallv(x, {1, 1}, {0, 1}, x, three, {0, 1, 2}, DataType::kFloat32), "send counts");
  // Nothing to move: fine without peers.
  EXPECT_TRUE(coll.allgatherv(nullptr, nullptr, zeros, zeros, DataType::kFloat32).ok());
  EXPECT_TRUE(coll.reducescatter(nullptr, nullptr, zeros, DataType::kFloat32, ReduceOp::kSum).ok());
  EXPECT_TRUE(coll.broadcast(nullptr, 0, DataType::kFloat32, 2).ok());
}

}  // namespace
}  // namespace kolo::algorithms
