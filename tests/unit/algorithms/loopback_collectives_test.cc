// The loopback transport's allgather, broadcast, alltoall and reducescatter, with
// ranks as threads at world sizes 1..8: one fixture typed over dtypes, counts that
// differ per rank (zeros included), every broadcast root in place and not,
// reducescatter shards not divisible by the world size, disagreeing calls.
// Values are small integers, exact in every dtype, so results compare with ==.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "common/check.h"
#include "tests/unit/algorithms/spawn.h"
#include "tests/unit/algorithms/values.h"
#include "transport/reduction.h"
#include "transports/loopback/loopback_world.h"

namespace kolo::loopback {
namespace {

using kolo::testing::find_transport;
using kolo::testing::spawn;
using transport::CollectiveView;

constexpr int kMaxRanks = 8;

transport::Transport& loopback(transport::World& world) {
  transport::Transport* t = find_transport(world, "loopback");
  KOLO_CHECK(t != nullptr);
  return *t;
}

Status run(transport::World& world, Collective op, const CollectiveView& view) {
  return loopback(world).collective(op, view)->wait();
}

template <typename D>
class LoopbackCollectivesTest : public ::testing::Test {
 protected:
  using T = typename D::Storage;

  // A value that names its origin: rank `from`, destination `to`, element k.
  static T tag(int from, int to, int64_t k) {
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
                                kolo::testing::Int32Type, kolo::testing::Int64Type>;
TYPED_TEST_SUITE(LoopbackCollectivesTest, Dtypes);

// Rank r's allgather contribution under pattern p: zeros, ones, and differing counts.
int64_t gather_count(int pattern, int r) {
  switch (pattern) {
    case 0: return 0;                        // nobody sends
    case 1: return 1;                        // one each
    case 2: return (r * 3) % 4;              // some ranks send nothing
    default: return 500 + 37 * r;            // large and different
  }
}

TYPED_TEST(LoopbackCollectivesTest, AllgatherConcatenatesInRankOrder) {
  using T = typename TypeParam::Storage;
  for (int size = 1; size <= kMaxRanks; ++size) {
    for (int pattern = 0; pattern < 4; ++pattern) {
      spawn(size, [&](int rank, transport::World& world) {
        CollectiveView v = this->view(nullptr, nullptr);
        int64_t total = 0;
        for (int r = 0; r < size; ++r) {
          v.recv_counts.push_back(gather_count(pattern, r));
          total += v.recv_counts.back();
        }
        std::vector<T> in(v.recv_counts[rank]);
        for (size_t k = 0; k < in.size(); ++k) in[k] = this->tag(rank, 0, k);
        std::vector<T> out(total, TypeParam::from_double(99));
        v.input = in.data();
        v.output = out.data();
        EXPECT_TRUE(run(world, Collective::kAllgather, v).ok());
        int64_t at = 0;
        for (int r = 0; r < size; ++r) {
          for (int64_t k = 0; k < v.recv_counts[r]; ++k, ++at) {
            EXPECT_EQ(out[at], this->tag(r, 0, k)) << "size " << size << " block " << r;
          }
        }
      });
    }
  }
}

// In place: each rank's input already sits at its block of the output.
TYPED_TEST(LoopbackCollectivesTest, AllgatherInPlace) {
  using T = typename TypeParam::Storage;
  for (int size = 1; size <= kMaxRanks; ++size) {
    spawn(size, [&](int rank, transport::World& world) {
      CollectiveView v = this->view(nullptr, nullptr);
      int64_t total = 0, mine = 0;
      for (int r = 0; r < size; ++r) {
        if (r == rank) mine = total;
        v.recv_counts.push_back(gather_count(2, r) + 3);
        total += v.recv_counts.back();
      }
      std::vector<T> out(total, TypeParam::from_double(99));
      for (int64_t k = 0; k < v.recv_counts[rank]; ++k) out[mine + k] = this->tag(rank, 0, k);
      v.input = out.data() + mine;
      v.output = out.data();
      EXPECT_TRUE(run(world, Collective::kAllgather, v).ok());
      int64_t at = 0;
      for (int r = 0; r < size; ++r) {
        for (int64_t k = 0; k < v.recv_counts[r]; ++k) EXPECT_EQ(out[at++], this->tag(r, 0, k));
      }
    });
  }
}

TYPED_TEST(LoopbackCollectivesTest, BroadcastFromEveryRootInPlaceAndNot) {
  using T = typename TypeParam::Storage;
  for (int size = 1; size <= kMaxRanks; ++size) {
    for (int root = 0; root < size; ++root) {
      for (int64_t count : {0, 1, 7, 1000}) {
        for (bool in_place : {true, false}) {
          spawn(size, [&](int rank, transport::World& world) {
            std::vector<T> out(count, TypeParam::from_double(99));
            std::vector<T> in(count, TypeParam::from_double(98));
            std::vector<T>& source = in_place ? out : in;
            if (rank == root) {
              for (int64_t k = 0; k < count; ++k) source[k] = this->tag(root, 0, k);
            }
            CollectiveView v = this->view(source.data(), out.data());
            v.count = count;
            v.root = root;
            EXPECT_TRUE(run(world, Collective::kBroadcast, v).ok());
            for (int64_t k = 0; k < count; ++k) ASSERT_EQ(out[k], this->tag(root, 0, k));
            if (rank == root && !in_place) {  // the root's input is left alone
              for (int64_t k = 0; k < count; ++k) ASSERT_EQ(in[k], this->tag(root, 0, k));
            }
          });
        }
      }
    }
  }
}

// Elements rank s sends to rank d: zero on some pairs, different on every pair.
int64_t pair_count(int pattern, int s, int d) {
  switch (pattern) {
    case 0: return 0;
    case 1: return (s + 2 * d) % 4;
    default: return 100 + 13 * s + 7 * d;
  }
}

TYPED_TEST(LoopbackCollectivesTest, AlltoallDeliversEveryPairsBlock) {
  using T = typename TypeParam::Storage;
  for (int size = 1; size <= kMaxRanks; ++size) {
    for (int pattern = 0; pattern < 3; ++pattern) {
      spawn(size, [&](int rank, transport::World& world) {
        CollectiveView v = this->view(nullptr, nullptr);
        std::vector<T> in, out;
        for (int peer = 0; peer < size; ++peer) {
          v.send_counts.push_back(pair_count(pattern, rank, peer));
          v.recv_counts.push_back(pair_count(pattern, peer, rank));
          for (int64_t k = 0; k < v.send_counts.back(); ++k) in.push_back(this->tag(rank, peer, k));
          out.resize(out.size() + v.recv_counts.back(), TypeParam::from_double(99));
        }
        v.input = in.data();
        v.output = out.data();
        EXPECT_TRUE(run(world, Collective::kAlltoall, v).ok());
        size_t at = 0;
        for (int s = 0; s < size; ++s) {
          for (int64_t k = 0; k < v.recv_counts[s]; ++k, ++at) {
            EXPECT_EQ(out[at], this->tag(s, rank, k)) << "size " << size << " from " << s;
          }
        }
      });
    }
  }
}

// Horovod's shards: the first total % size ranks get one more element.
std::vector<int64_t> shards(int64_t total, int size) {
  std::vector<int64_t> counts;
  for (int r = 0; r < size; ++r) counts.push_back(total / size + (r < total % size ? 1 : 0));
  return counts;
}

TYPED_TEST(LoopbackCollectivesTest, ReducescatterEveryOpUnevenShards) {
  using T = typename TypeParam::Storage;
  for (int size = 1; size <= kMaxRanks; ++size) {
    for (ReduceOp op : kolo::testing::kKernelOps) {
      for (int64_t total : {int64_t{0}, int64_t{1}, int64_t{size - 1}, int64_t{size + 1},
                            int64_t{1001}}) {
        for (bool in_place : {false, true}) {
          spawn(size, [&](int rank, transport::World& world) {
            std::vector<T> in = kolo::testing::make_input<TypeParam>(op, rank, total);
            CollectiveView v = this->view(in.data(), in.data());
            v.reduction.op = op;
            v.recv_counts = shards(total, size);
            std::vector<T> out(v.recv_counts[rank], TypeParam::from_double(99));
            if (!in_place) v.output = out.data();
            EXPECT_TRUE(run(world, Collective::kReducescatter, v).ok());
            const T* result = in_place ? in.data() : out.data();
            int64_t first = 0;
            for (int r = 0; r < rank; ++r) first += v.recv_counts[r];
            for (int64_t k = 0; k < v.recv_counts[rank]; ++k) {
              ASSERT_EQ(TypeParam::to_double(result[k]),
                        (kolo::testing::expected_value<TypeParam>(op, size, first + k)))
                  << "size " << size << " " << op_name(op) << " total " << total << " rank "
                  << rank << " k " << k;
            }
          });
        }
      }
    }
  }
}

// Collectives and allreduces back to back: the rendezvous generations never mix.
TEST(LoopbackCollectivesMixTest, ManyRoundsOfEveryOperation) {
  spawn(5, [&](int rank, transport::World& world) {
    for (int round = 0; round < 20; ++round) {
      std::vector<int32_t> mine(rank + round % 3, rank * 100 + round);
      std::vector<int64_t> counts;
      int64_t total = 0;
      for (int r = 0; r < 5; ++r) counts.push_back(r + round % 3), total += counts.back();
      std::vector<int32_t> gathered(total);
      CollectiveView g;
      g.input = mine.data();
      g.output = gathered.data();
      g.dtype = DataType::kInt32;
      g.recv_counts = counts;
      EXPECT_TRUE(run(world, Collective::kAllgather, g).ok());
      EXPECT_EQ(gathered.back(), 400 + round);

      int32_t x = rank + 1, sum = 0;
      transport::Bucket b = transport::host_bucket(&x, &sum, 1, DataType::kInt32);
      EXPECT_TRUE(loopback(world).allreduce(b)->wait().ok());
      EXPECT_EQ(sum, 15);

      int32_t value = rank == round % 5 ? round : -1;
      CollectiveView bc;
      bc.input = bc.output = &value;
      bc.dtype = DataType::kInt32;
      bc.count = 1;
      bc.root = round % 5;
      EXPECT_TRUE(run(world, Collective::kBroadcast, bc).ok());
      EXPECT_EQ(value, round);
    }
  });
}

TEST(LoopbackCollectivesErrorTest, DisagreeingCallsFailOnEveryRank) {
  spawn(3, [&](int rank, transport::World& world) {
    std::vector<float> in(10), out(30);
    CollectiveView v;
    v.input = in.data();
    v.output = out.data();
    v.recv_counts = {2, 2, rank == 2 ? 3 : 2};  // rank 2 disagrees
    Status s = run(world, Collective::kAllgather, v);
    EXPECT_EQ(s.code(), Code::kMismatch) << s.to_string();

    v.recv_counts = {1, 1, 1};
    v.dtype = rank == 1 ? DataType::kInt32 : DataType::kFloat32;
    s = run(world, Collective::kAllgather, v);
    EXPECT_EQ(s.code(), Code::kMismatch) << s.to_string();
    v.dtype = DataType::kFloat32;

    v.count = 4;
    v.root = rank == 0 ? 1 : 0;  // ranks name different roots
    s = run(world, Collective::kBroadcast, v);
    EXPECT_EQ(s.code(), Code::kMismatch) << s.to_string();
    v.root = 3;  // the same root on every rank, but not a rank
    s = run(world, Collective::kBroadcast, v);
    EXPECT_EQ(s.code(), Code::kMismatch) << s.to_string();

    v.send_counts = {1, 1, 1};
    v.recv_counts = {1, 1, rank == 0 ? 2 : 1};  // rank 0 expects 2 from rank 2, gets 1
    s = run(world, Collective::kAlltoall, v);
    EXPECT_EQ(s.code(), Code::kMismatch) << s.to_string();
    EXPECT_NE(s.message().find("rank 2 sends 1 elements to rank 0"), std::string::npos)
        << s.message();
    v.recv_counts = {1, 1};  // one count short
    s = run(world, Collective::kAlltoall, v);
    EXPECT_EQ(s.code(), Code::kMismatch) << s.to_string();

    v.recv_counts = {1, 1, 1};
    v.reduction.op = rank == 2 ? ReduceOp::kMax : ReduceOp::kSum;
    s = run(world, Collective::kReducescatter, v);
    EXPECT_EQ(s.code(), Code::kMismatch) << s.to_string();

    // The world still works after all that.
    v.reduction.op = ReduceOp::kSum;
    in.assign(10, static_cast<float>(rank + 1));
    EXPECT_TRUE(run(world, Collective::kReducescatter, v).ok());
    EXPECT_EQ(out[0], 6.0f);
  });
}

TEST(LoopbackCollectivesErrorTest, SupportsCpuAndKernelOpsOnly) {
  auto worlds = create_worlds(1);
  transport::Transport& t = loopback(worlds[0]);
  CollectiveView v;
  for (Collective op : {Collective::kAllgather, Collective::kBroadcast,
                          Collective::kAlltoall, Collective::kReducescatter}) {
    EXPECT_TRUE(t.supports_collective(op, v).ok()) << collective_name(op);
  }
  v.reduction.op = ReduceOp::kAverage;
  EXPECT_EQ(t.supports_collective(Collective::kReducescatter, v).code(), Code::kUnsupported);
  EXPECT_TRUE(t.supports_collective(Collective::kAllgather, v).ok());  // op unused there
  v.device.kind = DeviceKind::kCuda;
  Status s = t.supports_collective(Collective::kAllgather, v);
  EXPECT_EQ(s.code(), Code::kUnsupported);
  EXPECT_EQ(t.collective(Collective::kAllgather, v)->wait().code(), Code::kUnsupported);
}

}  // namespace
}  // namespace kolo::loopback
