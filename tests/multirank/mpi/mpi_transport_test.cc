// The "mpi" and "ring" transports under mpiexec: every dtype (one typed fixture),
// every CPU op, counts 0, 1, n-1, n+1, 1000 and 2^20+3, in place and out of
// place. Inputs are small integers, so every sum and product is exact in every
// dtype (bfloat16 included) and results compare bit for bit.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "tests/multirank/mpi/allreduce_values.h"
#include "tests/multirank/mpi/mpi_test_world.h"
#include "transports/mpi/mpi_transport.h"
#include "transports/mpi/mpi_wait.h"

namespace kolo::mpi {
namespace {

using namespace testing;  // NOLINT: the test helpers
using transport::Bucket;

int rank() { return test_world().control->topology().rank; }
int size() { return test_world().control->topology().size; }

template <typename T>
class TransportAllreduceTest : public ::testing::Test {
 protected:
  void check_transport(const char* name) {
    transport::Transport* transport = find_transport(name);
    ASSERT_NE(transport, nullptr) << "the MPI world offers no transport " << name;
    check_counts<T>(*transport, rank(), size());
  }
};

TYPED_TEST_SUITE(TransportAllreduceTest, AllDtypes);

TYPED_TEST(TransportAllreduceTest, Mpi) { this->check_transport("mpi"); }
TYPED_TEST(TransportAllreduceTest, Ring) { this->check_transport("ring"); }

// Integer sums and products wrap around in two's complement on both transports.
TEST(MpiTransport, IntegerArithmeticWraps) {
  for (const char* name : {"mpi", "ring"}) {
    SCOPED_TRACE(name);
    transport::Transport& t = *find_transport(name);
    // int32: INT32_MAX on rank 0 and 1 elsewhere: wraps to INT32_MIN + size - 2.
    std::vector<int32_t> i32(5, rank() == 0 ? std::numeric_limits<int32_t>::max() : 1);
    ASSERT_TRUE(t.allreduce(bucket_of(i32.data(), i32.data(), 5, ReduceOp::kSum))->wait().ok());
    EXPECT_EQ(i32[4], std::numeric_limits<int32_t>::min() + size() - 2);
    // int8: 100 per rank.
    std::vector<int8_t> i8(3, 100);
    ASSERT_TRUE(t.allreduce(bucket_of(i8.data(), i8.data(), 3, ReduceOp::kSum))->wait().ok());
    EXPECT_EQ(i8[2], static_cast<int8_t>(static_cast<uint8_t>(100 * size())));
    // int64 product: 2^40 per rank overflows from 2 ranks on: 2^(40n) mod 2^64 = 0.
    std::vector<int64_t> i64(2, int64_t{1} << 40);
    ASSERT_TRUE(
        t.allreduce(bucket_of(i64.data(), i64.data(), 2, ReduceOp::kProduct))->wait().ok());
    EXPECT_EQ(i64[1], 0);
    // uint16 sum: 65535 per rank: -size mod 2^16.
    std::vector<uint16_t> u16(1, 65535);
    ASSERT_TRUE(t.allreduce(bucket_of(u16.data(), u16.data(), 1, ReduceOp::kSum))->wait().ok());
    EXPECT_EQ(u16[0], static_cast<uint16_t>(65536 - size()));
  }
}

TEST(MpiTransport, CountsAboveTheLimitPerCallAreSplit) {
  // A limit of 1000 elements per MPI call stands in for INT_MAX.
  std::unique_ptr<MpiTransport> split;
  ASSERT_TRUE(MpiTransport::create(testing::dup_world_comms(), &split, 1000).ok());
  for (int64_t count : {int64_t{999}, int64_t{1000}, int64_t{2503}}) {
    for (bool in_place : {true, false}) {
      check_allreduce<int32_t>(*split, rank(), size(), count, ReduceOp::kSum, in_place);
      check_allreduce<Float16>(*split, rank(), size(), count, ReduceOp::kProduct, in_place);
    }
  }
}

TEST(MpiTransport, SupportsCpuSumMinMaxProductOnly) {
  const transport::Transport& t = *find_transport("mpi");
  float x = 0;
  Bucket bucket = bucket_of(&x, &x, 1, ReduceOp::kSum);
  EXPECT_TRUE(t.supports(bucket).ok());
  Bucket average = bucket;  // decide_reduction never hands a transport AVERAGE
  average.reduction.op = ReduceOp::kAverage;
  EXPECT_EQ(t.supports(average).code(), Code::kUnsupported);
  Bucket cuda = bucket;
  cuda.device.kind = DeviceKind::kCuda;
  Status on_gpu = t.supports(cuda);
  EXPECT_EQ(on_gpu.code(), Code::kUnsupported);
  EXPECT_NE(on_gpu.message().find("cuda:0"), std::string::npos) << on_gpu.message();
  Bucket scaled = bucket;  // factors go through the shared helper
  scaled.reduction.postscale = 0.5;
  EXPECT_TRUE(t.supports(scaled).ok());
  // Asked anyway, the transport answers with the reason instead of reducing.
  EXPECT_EQ(find_transport("mpi")->allreduce(average)->wait().code(), Code::kUnsupported);
}

TEST(MpiTransport, WorkTestTurnsTrueAndWaitThenReturnsAtOnce) {
  std::vector<double> data(4096, rank() + 1.0);
  auto work = find_transport("mpi")->allreduce(
      bucket_of(data.data(), data.data(), 4096, ReduceOp::kSum));
  Waiter waiter;
  while (!work->test()) waiter.pause();
  EXPECT_TRUE(work->wait().ok());
  EXPECT_EQ(data[4095], size() * (size() + 1) / 2.0);
}

}  // namespace
}  // namespace kolo::mpi
