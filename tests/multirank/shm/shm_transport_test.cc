// The "shm" transport under mpiexec (all ranks on this machine, so one node),
// on node layers made through the MPI world's control plane:
// every dtype and op exactly, counts 0, 1, n-1, n+1, 1000 and 2^20+3, in place
// and out of place, with a prescale and an output factor; an engine with tiny slots so that small buckets run through
// many slices and both slots are reused; fused buckets handed over unpacked;
// plain and streaming stores into the slots, forced and calibrated;
// repeated calls; misuse.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "tests/multirank/mpi/allreduce_values.h"
#include "tests/multirank/mpi/mpi_test_world.h"
#include "transports/shm/node.h"
#include "transports/shm/transport.h"

namespace kolo::shm {
namespace {

using namespace mpi::testing;  // NOLINT: the test helpers

int rank() { return test_world().control->topology().rank; }
int size() { return test_world().control->topology().size; }

// An engine with `slot_bytes` slots on a node layer of its own (every rank is
// on this node), writing its slots as `mode` says. Collective over the world.
std::unique_ptr<ShmAllreduce> engine_of(size_t slot_bytes,
                                        ShmAllreduce::StoreMode mode = ShmAllreduce::StoreMode::kAuto) {
  NodeOptions options;
  options.allreduce_slot_bytes = slot_bytes;
  std::shared_ptr<Node> node;
  Status s = Node::create(*test_world().control, options, &node);
  EXPECT_TRUE(s.ok()) << s.to_string();
  std::unique_ptr<ShmAllreduce> engine;
  if (node) {
    EXPECT_TRUE(ShmAllreduce::create(node, nullptr, {mode}, &engine).ok());
  }
  return engine;
}

// A float SUM in place with postscale 0.25: every element scaled exactly once.
void check_output_factor(transport::Transport& t, int64_t count) {
  SCOPED_TRACE("output factor, count " + std::to_string(count));
  std::vector<float> f(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) f[i] = static_cast<float>((rank() + 1) * (i % 7));
  transport::Bucket scaled = bucket_of(f.data(), f.data(), count, ReduceOp::kSum);
  scaled.reduction.postscale = 0.25;
  ASSERT_TRUE(t.allreduce(scaled)->wait().ok());
  const float ranks_sum = static_cast<float>(size() * (size() + 1) / 2);
  int64_t wrong = 0, first = -1;
  for (int64_t i = 0; i < count; ++i) {
    if (f[i] == ranks_sum * (i % 7) * 0.25f) continue;
    if (wrong++ == 0) first = i;
  }
  EXPECT_EQ(wrong, 0) << "first wrong element " << first;
}

template <typename T>
class ShmAllreduceTest : public ::testing::Test {};
TYPED_TEST_SUITE(ShmAllreduceTest, AllDtypes);

TYPED_TEST(ShmAllreduceTest, EveryOpAndCount) {
  transport::Transport* shm = find_transport("shm");
  ASSERT_NE(shm, nullptr) << "one node: the MPI world should offer shm";
  check_counts<TypeParam>(*shm, rank(), size());
}

// The prescale and the output factor applied inside the engine (the bucket is never
// packed), on every dtype and op, in one pass over the own shard: tensors that
// cross the 16 KiB pieces of transports/shm/pass.h, the slices of a 4 KiB and of the default
// slot, with plain and streaming stores, empty tensors, in place and out of place.
TYPED_TEST(ShmAllreduceTest, PrescaleAndOutputFactorInOnePass) {
  if (Dtype<TypeParam>::kValue == DataType::kBool) GTEST_SKIP() << "bool takes no factors";
  struct Engine {
    ShmAllreduce::StoreMode mode;
    size_t slot_bytes;
    std::vector<int64_t> counts;  // a few slices per bucket: 4 ranks may share 2 cores
  };
  const std::vector<Engine> engines = {
      {ShmAllreduce::StoreMode::kCached, 4096, {1, 0, 3001, 65}},
      {ShmAllreduce::StoreMode::kStreaming, 4096, {1, 3001, 0, 65}},
      {ShmAllreduce::StoreMode::kCached, ShmAllreduce::kDefaultSlotBytes, {1, 0, 300001, 65}},
      {ShmAllreduce::StoreMode::kStreaming, ShmAllreduce::kDefaultSlotBytes, {300001, 0, 70001}}};
  for (const Engine& e : engines) {
    std::unique_ptr<ShmAllreduce> engine = engine_of(e.slot_bytes, e.mode);
    ASSERT_NE(engine, nullptr);
    ShmTransport t(std::move(engine));
    for (ReduceOp op : kOps) check_scaled<TypeParam>(t, rank(), size(), e.counts, op, 0.5, 2.0);
    check_scaled<TypeParam>(t, rank(), size(), e.counts, ReduceOp::kSum, 2.0, 1.0);
  }
}

// A 256-byte slot: 1000 elements are many slices, both slots reused many times.
TEST(ShmAllreduce, TinySlotsSliceAndReuse) {
  std::unique_ptr<ShmAllreduce> engine = engine_of(256);  // one node: the world is the node
  ASSERT_NE(engine, nullptr);
  ShmTransport tiny(std::move(engine));
  for (int repeat = 0; repeat < 3; ++repeat) {
    for (int64_t count : {int64_t{1}, int64_t{63}, int64_t{64}, int64_t{65}, int64_t{1000},
                          int64_t{4099}}) {
      for (bool in_place : {true, false}) {
        check_allreduce<float>(tiny, rank(), size(), count, ReduceOp::kSum, in_place);
        check_allreduce<int8_t>(tiny, rank(), size(), count, ReduceOp::kMax, in_place);
        check_allreduce<Float16>(tiny, rank(), size(), count, ReduceOp::kProduct, in_place);
        check_allreduce<double>(tiny, rank(), size(), count, ReduceOp::kMin, in_place);
      }
    }
  }
}

// Many small calls back to back: counters and slots stay in step across calls.
TEST(ShmAllreduce, RepeatedCalls) {
  transport::Transport& shm = *find_transport("shm");
  for (int i = 0; i < 200; ++i) {
    std::vector<int32_t> v(static_cast<size_t>(1 + i % 17), rank() + i);
    ASSERT_TRUE(shm.allreduce(bucket_of(v.data(), v.data(), static_cast<int64_t>(v.size()),
                                        ReduceOp::kSum))
                    ->wait()
                    .ok());
    const int32_t want = size() * (size() - 1) / 2 + size() * i;
    EXPECT_EQ(v.front(), want);
    EXPECT_EQ(v.back(), want);
  }
}

// A fused bucket unpacked: slices and shards span tensors (tiny slots: many
// tensors per slice and many slices per tensor), empty tensors anywhere.
TEST(ShmAllreduce, FusedBucketUnpacked) {
  std::unique_ptr<ShmAllreduce> engine = engine_of(256);
  ASSERT_NE(engine, nullptr);
  ShmTransport tiny(std::move(engine));
  transport::Transport& shm = *find_transport("shm");
  const std::vector<int64_t> counts = {0, 1, 63, 0, 1000, 5, 4099, 17, 0};
  const std::vector<int64_t> large = {3, 300001, 1, 131072, 70000, 0};
  for (transport::Transport* t : {static_cast<transport::Transport*>(&tiny), &shm}) {
    for (ReduceOp op : kOps) {
      check_unpacked<float>(*t, rank(), size(), counts, op);
      check_unpacked<int8_t>(*t, rank(), size(), counts, op);
      check_unpacked<Float16>(*t, rank(), size(), counts, op);
    }
    check_unpacked<double>(*t, rank(), size(), large, ReduceOp::kSum);
    check_unpacked<int32_t>(*t, rank(), size(), {0}, ReduceOp::kMax);
    check_unpacked<int32_t>(*t, rank(), size(), {}, ReduceOp::kMax);
  }
}

// Unpacked with the output factor: applied once to every element of every tensor.
TEST(ShmAllreduce, FusedBucketUnpackedAppliesOutputFactor) {
  transport::Transport& shm = *find_transport("shm");
  std::vector<std::vector<float>> data;
  transport::Bucket bucket;
  for (int64_t count : {int64_t{7}, int64_t{200000}, int64_t{0}, int64_t{65537}}) {
    data.emplace_back(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) data.back()[i] = static_cast<float>((rank() + 1) * (i % 5));
  }
  for (auto& d : data) {
    bucket.tensors.push_back({d.data(), d.data(), static_cast<int64_t>(d.size()), nullptr});
    bucket.count += static_cast<int64_t>(d.size());
  }
  bucket.reduction.postscale = 0.5;
  ASSERT_TRUE(shm.allreduce(bucket)->wait().ok());
  const float ranks_sum = static_cast<float>(size() * (size() + 1) / 2);
  for (size_t t = 0; t < data.size(); ++t)
    for (size_t i = 0; i < data[t].size(); ++i)
      ASSERT_EQ(data[t][i], ranks_sum * static_cast<float>(i % 5) * 0.5f) << "tensor " << t << " element " << i;
}

// A count of T just over kStreamMinBytes (odd, so shards are uneven). Just over,
// not far over: with 4 KiB slots every slice is a synchronisation of all ranks,
// and with more ranks than cores on a loaded machine each one can cost a
// scheduler time slice. (With 300001 elements for every dtype this test was
// 10 of the program's 23 s at np2, and the program took 298 s of its 300 s
// limit at np3, load 35.)
template <typename T>
int64_t just_streamed() {
  return static_cast<int64_t>(ShmAllreduce::kStreamMinBytes / sizeof(T)) + 3;
}

// Note [Streaming stores across distant cores]: both ways of writing the slots,
// forced, give exactly the expected results, with slots smaller and larger than
// the streamed pieces, in place and out of place, packed and unpacked, with an
// output factor applied piece by piece, and with the outputs streamed too.
TEST(ShmAllreduce, StreamingAndCachedStoresGiveExactResults) {
  for (ShmAllreduce::StoreMode mode :
       {ShmAllreduce::StoreMode::kCached, ShmAllreduce::StoreMode::kStreaming}) {
    for (size_t slot_bytes : {size_t{4096}, ShmAllreduce::kDefaultSlotBytes}) {
      SCOPED_TRACE(std::string(mode == ShmAllreduce::StoreMode::kStreaming ? "streaming" : "cached") +
                   ", slot " + std::to_string(slot_bytes));
      std::unique_ptr<ShmAllreduce> engine = engine_of(slot_bytes, mode);
      ASSERT_NE(engine, nullptr);
      ShmAllreduce* raw = engine.get();
      ShmTransport t(std::move(engine));
      for (ReduceOp op : kOps) {
        for (bool in_place : {true, false}) {
          check_allreduce<float>(t, rank(), size(), just_streamed<float>(), op, in_place);
          check_allreduce<int8_t>(t, rank(), size(), just_streamed<int8_t>(), op, in_place);
          check_allreduce<Float16>(t, rank(), size(), just_streamed<Float16>(), op, in_place);
        }
      }
      EXPECT_EQ(raw->streaming(), mode == ShmAllreduce::StoreMode::kStreaming && size() > 1);
      // From kStreamOutputMinBytes up, the outputs are streamed too, whatever
      // the slots' mode (Note [Streaming large outputs, near and far]), unless
      // they are the inputs (Note [Plain stores into a buffer just read]).
      const int64_t huge = static_cast<int64_t>(ShmAllreduce::kStreamOutputMinBytes / 4) + 3;
      for (bool in_place : {true, false}) {
        check_allreduce<float>(t, rank(), size(), huge, ReduceOp::kSum, in_place);
        if (size() > 1) {
          EXPECT_EQ(raw->streamed_last_output(), !in_place);
        }
        check_allreduce<double>(t, rank(), size(), huge, ReduceOp::kMax, in_place);
      }
      check_allreduce<float>(t, rank(), size(), huge - 4, ReduceOp::kSum, false);
      EXPECT_FALSE(raw->streamed_last_output());
      check_unpacked<double>(t, rank(), size(), {3, 400001, 1, 131072, 0, 70000}, ReduceOp::kSum);
      check_unpacked<int32_t>(t, rank(), size(), {70000, 5, 0, 65537}, ReduceOp::kMax);

      check_output_factor(t, just_streamed<float>());
    }
  }
}

// Note [Streaming stores across distant cores]: buckets from 8 KiB may stream
// their slots (the threshold was 256 KiB, and far apart a 128 KiB bucket then
// cost 3x a streamed one); smaller ones never do. Exact either way.
TEST(ShmAllreduce, BucketsFrom8KiBMayStream) {
  EXPECT_EQ(ShmAllreduce::kStreamMinBytes, size_t{8} << 10);
  std::unique_ptr<ShmAllreduce> engine =
      engine_of(ShmAllreduce::kDefaultSlotBytes, ShmAllreduce::StoreMode::kStreaming);
  ASSERT_NE(engine, nullptr);
  ShmAllreduce* raw = engine.get();
  ShmTransport t(std::move(engine));
  check_allreduce<float>(t, rank(), size(), 2047, ReduceOp::kSum, false);  // 8 KiB - 4 B
  EXPECT_FALSE(raw->streaming());
  check_allreduce<float>(t, rank(), size(), 2051, ReduceOp::kSum, false);  // 8 KiB + 12 B
  EXPECT_EQ(raw->streaming(), size() > 1);
}

// Left to measure (the default), the ranks calibrate on the first large bucket
// and every 64 after, and all follow local rank 0's decision.
TEST(ShmAllreduce, CalibratedStoreModeIsTheSameOnEveryRank) {
  std::unique_ptr<ShmAllreduce> engine = engine_of(ShmAllreduce::kDefaultSlotBytes);
  ASSERT_NE(engine, nullptr);
  const int64_t count = static_cast<int64_t>(ShmAllreduce::kStreamMinBytes / sizeof(int32_t));
  std::vector<int32_t> v(static_cast<size_t>(count));
  for (int i = 0; i < 130; ++i) {
    std::fill(v.begin(), v.end(), rank() + i);
    ASSERT_TRUE(engine->run(v.data(), v.data(), count, DataType::kInt32, ReduceOp::kSum).ok());
    const int32_t want = size() * (size() - 1) / 2 + size() * i;
    ASSERT_EQ(v.front(), want);
    ASSERT_EQ(v.back(), want);
    if (i % 64 == 0) {
      int mine = engine->streaming() ? 1 : 0;
      std::vector<int> all(static_cast<size_t>(size()));
      ASSERT_EQ(MPI_Allgather(&mine, 1, MPI_INT, all.data(), 1, MPI_INT, MPI_COMM_WORLD), MPI_SUCCESS);
      for (int r = 0; r < size(); ++r) EXPECT_EQ(all[r], all[0]) << "rank " << r << " after run " << i;
    }
  }
}

TEST(ShmAllreduce, SupportsCpuMemoryOnly) {
  const transport::Transport& t = *find_transport("shm");
  float x = 0;
  transport::Bucket bucket = bucket_of(&x, &x, 1, ReduceOp::kSum);
  EXPECT_TRUE(t.supports(bucket).ok());
  transport::Bucket cuda = bucket;
  cuda.device.kind = DeviceKind::kCuda;
  EXPECT_EQ(t.supports(cuda).code(), Code::kUnsupported);
  transport::Bucket scaled = bucket;
  scaled.reduction.prescale = 2.0;
  EXPECT_TRUE(t.supports(scaled).ok());
  // AVERAGE never reaches a transport (decide_reduction); asked anyway, the engine
  // refuses before touching the segment (on every rank).
  transport::Bucket average = bucket;
  average.reduction.op = ReduceOp::kAverage;
  EXPECT_EQ(find_transport("shm")->allreduce(average)->wait().code(), Code::kInvalidArgument);
  transport::Bucket null_buffer = bucket_of<float>(nullptr, nullptr, 4, ReduceOp::kSum);
  EXPECT_EQ(find_transport("shm")->allreduce(null_buffer)->wait().code(),
            Code::kInvalidArgument);
  transport::Bucket null_tensor = bucket_of<float>(nullptr, nullptr, 5, ReduceOp::kSum);
  null_tensor.tensors = {{&x, &x, 1, nullptr}, {nullptr, &x, 4, nullptr}};
  Status status = find_transport("shm")->allreduce(null_tensor)->wait();
  EXPECT_EQ(status.code(), Code::kInvalidArgument);
  EXPECT_NE(status.message().find("null buffer in tensor 1"), std::string::npos) << status.message();
  // Refused before the segment was touched: the engine still works.
  float y = 1;
  EXPECT_TRUE(find_transport("shm")->allreduce(bucket_of(&y, &y, 1, ReduceOp::kSum))->wait().ok());
  EXPECT_EQ(y, static_cast<float>(size()));
}

// The output factor and integer division are applied to every result element,
// in cache per shard. Sizes cross slices.
TEST(ShmAllreduce, AppliesOutputFactorAndIntegerDivision) {
  transport::Transport& shm = *find_transport("shm");
  for (int64_t count : {int64_t{1}, int64_t{1000}, int64_t{300001}}) {
    check_output_factor(shm, count);

    std::vector<int32_t> v(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) v[i] = (i % 2 ? -1 : 1) * static_cast<int32_t>(rank() + 2 * i % 11);
    transport::Bucket divided = bucket_of(v.data(), v.data(), count, ReduceOp::kSum);
    divided.reduction.divide = size();
    ASSERT_TRUE(shm.allreduce(divided)->wait().ok());
    for (int64_t i = 0; i < count; ++i) {
      int64_t sum = 0;
      for (int r = 0; r < size(); ++r) sum += (i % 2 ? -1 : 1) * static_cast<int64_t>(r + 2 * i % 11);
      ASSERT_EQ(v[i], static_cast<int32_t>(sum / size())) << i;  // C++ truncates toward zero
    }
  }
}

}  // namespace
}  // namespace kolo::shm
