// The ring allreduce over loopback worlds (ranks as threads): world sizes 1..8,
// counts 0, 1, fewer than ranks, not divisible by ranks and large, every kernel op,
// in place and out of place, several dtypes; inputs chosen so results are exact.
#include "algorithms/ring_allreduce.h"
#include "transport/reduction.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "tests/unit/algorithms/spawn.h"
#include "tests/unit/algorithms/values.h"

namespace kolo::algorithms {
namespace {

using kolo::testing::count_wrong;
using kolo::testing::kKernelOps;
using kolo::testing::make_input;
using kolo::testing::spawn;

constexpr int kMaxRanks = 8;

// Runs one allreduce on this rank and checks the result (and, out of place, that
// the input is untouched).
template <typename D>
void allreduce_and_check(RingAllreduce& ring, int rank, int size, int64_t count, ReduceOp op,
                         bool in_place) {
  using T = typename D::Storage;
  std::vector<T> input = make_input<D>(op, rank, count);
  const std::vector<T> original = input;
  std::vector<T> output(static_cast<size_t>(count), D::from_double(99));
  T* out = in_place ? input.data() : output.data();
  const Status s = ring.run(input.data(), out, count, D::kType, op);
  ASSERT_TRUE(s.ok()) << s.to_string();
  int64_t first = -1;
  const int64_t wrong = count_wrong<D>(out, op, size, count, &first);
  EXPECT_EQ(wrong, 0) << "size " << size << " rank " << rank << " count " << count << " op "
                      << op_name(op) << (in_place ? " in place" : " out of place")
                      << ", first wrong index " << first;
  if (!in_place) {
    EXPECT_TRUE(input == original) << "the input was modified";
  }
}

template <typename D>
class RingAllreduceTest : public ::testing::Test {};

using Dtypes = ::testing::Types<testing::Float32Type, testing::Float64Type, testing::Float16Type,
                                testing::Bfloat16Type, testing::Int8Type, testing::Uint8Type,
                                testing::Int32Type, testing::Int64Type>;
TYPED_TEST_SUITE(RingAllreduceTest, Dtypes);

// One world per size; on it, calls back to back (as a coordinator makes them), so
// this also covers scratch reuse and message order across calls.
TYPED_TEST(RingAllreduceTest, SmallCountsEverySizeEveryOp) {
  for (int size = 1; size <= kMaxRanks; ++size) {
    const std::set<int64_t> counts = {0, 1, static_cast<int64_t>(size - 1), size + 1, 1000};
    spawn(size, [&](int rank, transport::World& world) {
      RingAllreduce ring(*world.p2p);
      for (int64_t count : counts) {
        for (ReduceOp op : kKernelOps) {
          for (bool in_place : {false, true}) {
            allreduce_and_check<TypeParam>(ring, rank, size, count, op, in_place);
          }
        }
      }
    });
  }
}

TYPED_TEST(RingAllreduceTest, LargeCount) {
  const int64_t count = (int64_t{1} << 20) + 3;
  struct Case {
    int size;
    ReduceOp op;
    bool in_place;
  };
  for (const Case& c : {Case{3, ReduceOp::kSum, false}, Case{8, ReduceOp::kSum, true},
                        Case{5, ReduceOp::kMax, false}}) {
    spawn(c.size, [&](int rank, transport::World& world) {
      RingAllreduce ring(*world.p2p);
      allreduce_and_check<TypeParam>(ring, rank, c.size, count, c.op, c.in_place);
    });
  }
}

// Tiny segments: many per chunk, a last one shorter than the rest, and segment
// sizes below one element (rounded up to one).
TYPED_TEST(RingAllreduceTest, ManySegmentsPerChunk) {
  for (size_t segment_bytes : {size_t{1}, size_t{4}, size_t{12}, size_t{100}}) {
    for (int size : {2, 3, 5, 8}) {
      spawn(size, [&](int rank, transport::World& world) {
        RingAllreduce ring(*world.p2p, RingOptions{segment_bytes});
        for (int64_t count : {int64_t{37}, int64_t{1000}}) {
          allreduce_and_check<TypeParam>(ring, rank, size, count, ReduceOp::kSum, false);
          allreduce_and_check<TypeParam>(ring, rank, size, count, ReduceOp::kMin, true);
        }
      });
    }
  }
}

// The verbs of one rank, recording the order of sends posted and receives
// waited for (ids of receives only; Note [Sends run a step ahead]).
class RecordingP2P : public transport::PointToPoint {
 public:
  explicit RecordingP2P(transport::PointToPoint& inner) : inner_(inner) {}
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  Status isend(int peer, const void* data, size_t bytes, int tag,
               transport::RequestId* id) override {
    events.push_back("send");
    return inner_.isend(peer, data, bytes, tag, id);
  }
  Status irecv(int peer, void* data, size_t bytes, int tag, transport::RequestId* id) override {
    Status s = inner_.irecv(peer, data, bytes, tag, id);
    receives.insert(*id);
    return s;
  }
  Status test(transport::RequestId id, bool* done) override { return inner_.test(id, done); }
  Status wait(transport::RequestId id) override {
    if (receives.count(id)) events.push_back("received");
    return inner_.wait(id);
  }
  std::vector<std::string> events;
  std::set<transport::RequestId> receives;

 private:
  transport::PointToPoint& inner_;
};

// Note [Sends run a step ahead]: at 2 ranks, 4 segments a chunk, the allgather's
// first segment is sent as soon as the reduce-scatter has received and reduced
// the first, not after its last.
TEST(RingAllreducePipelineTest, ASegmentGoesOnAsSoonAsItIsIn) {
  spawn(2, [&](int rank, transport::World& world) {
    RecordingP2P rec(*world.p2p);
    RingAllreduce ring(rec, RingOptions{16});
    allreduce_and_check<testing::Float32Type>(ring, rank, 2, 32, ReduceOp::kSum, true);
    // 4 sends of the reduce-scatter, then its first receive, then a send.
    ASSERT_GE(rec.events.size(), 6u);
    EXPECT_EQ(rec.events[4], "received");
    EXPECT_EQ(rec.events[5], "send") << "the allgather's first segment waited for the whole step";
  });
}

// Scratch grows for a large call and is reused, without harm, by smaller ones.
TEST(RingAllreduceScratchTest, LargeThenSmallOnOneInstance) {
  spawn(4, [&](int rank, transport::World& world) {
    RingAllreduce ring(*world.p2p, RingOptions{1024});
    for (int64_t count : {int64_t{100000}, int64_t{3}, int64_t{5000}, int64_t{0}, int64_t{17}}) {
      allreduce_and_check<testing::Float32Type>(ring, rank, 4, count, ReduceOp::kSum, count % 2);
    }
  });
}

TEST(RingAllreduceErrorTest, RejectsAverageAndBadArgumentsWithoutSendingAnything) {
  // A lone rank of a 3-rank world: an error must come back before any message,
  // or this would wait for peers that never come.
  auto worlds = loopback::create_worlds(3);
  RingAllreduce ring(*worlds[0].p2p);
  float x[4] = {1, 2, 3, 4};
  EXPECT_EQ(ring.run(x, x, 4, DataType::kFloat32, ReduceOp::kAverage).code(),
            Code::kInvalidArgument);
  EXPECT_EQ(ring.run(x, x, -1, DataType::kFloat32, ReduceOp::kSum).code(), Code::kInvalidArgument);
  EXPECT_EQ(ring.run(nullptr, x, 4, DataType::kFloat32, ReduceOp::kSum).code(),
            Code::kInvalidArgument);
  EXPECT_EQ(ring.run(x, x, 4, static_cast<DataType>(42), ReduceOp::kSum).code(),
            Code::kInvalidArgument);
  EXPECT_TRUE(ring.run(nullptr, nullptr, 0, DataType::kFloat32, ReduceOp::kSum).ok());
}

TEST(RingTransportTest, SupportsCpuMemoryOnly) {
  auto worlds = loopback::create_worlds(2);
  transport::Transport* ring = kolo::testing::find_transport(worlds[0], "ring");
  ASSERT_NE(ring, nullptr);
  transport::Bucket b;
  b.count = 10;
  EXPECT_TRUE(ring->supports(b).ok());
  b.device.kind = DeviceKind::kCuda;
  Status s = ring->supports(b);
  EXPECT_EQ(s.code(), Code::kUnsupported);
  EXPECT_NE(s.message().find("CPU"), std::string::npos) << s.message();
}

TEST(RingTransportTest, AllreduceCompletesSynchronously) {
  for (int size = 1; size <= kMaxRanks; ++size) {
    spawn(size, [&](int rank, transport::World& world) {
      transport::Transport* ring = kolo::testing::find_transport(world, "ring");
      ASSERT_NE(ring, nullptr);
      std::vector<int32_t> data(1001);
      for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<int32_t>(i) * (rank + 1);
      transport::Bucket b = transport::host_bucket(data.data(), data.data(),
                                                   static_cast<int64_t>(data.size()), DataType::kInt32);
      std::unique_ptr<transport::Work> work = ring->allreduce(b);
      EXPECT_TRUE(work->test());
      ASSERT_TRUE(work->wait().ok());
      const int32_t factor = size * (size + 1) / 2;
      for (size_t i = 0; i < data.size(); ++i) {
        ASSERT_EQ(data[i], static_cast<int32_t>(i) * factor) << "index " << i;
      }
    });
  }
}

}  // namespace
}  // namespace kolo::algorithms
