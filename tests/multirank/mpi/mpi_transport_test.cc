// The "mpi" and "ring" transports under mpiexec: every dtype (one typed fixture),
// every CPU op, counts 0, 1, n-1, n+1, 1000 and 2^20+3, in place and out of
// place. Inputs are small integers, so every sum and product is exact in every
// dtype (bfloat16 included) and results compare bit for bit.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "tests/multirank/mpi/mpi_test_world.h"
#include "transports/mpi/mpi_transport.h"
#include "transports/mpi/mpi_wait.h"

namespace kolo::mpi {
namespace {

using testing::find_transport;
using testing::test_world;
using transport::BucketView;

int rank() { return test_world().control->topology().rank; }
int size() { return test_world().control->topology().size; }

// C++ element type -> kolo dtype, and conversions through double.
template <typename T> struct Dtype;
#define KOLO_TEST_DTYPE(T, D)                                     \
  template <> struct Dtype<T> {                                   \
    static constexpr DataType kValue = D;                         \
    static T from(double v) { return static_cast<T>(v); }         \
    static double to(T v) { return static_cast<double>(v); }      \
  };
KOLO_TEST_DTYPE(uint8_t, DataType::kUint8)
KOLO_TEST_DTYPE(int8_t, DataType::kInt8)
KOLO_TEST_DTYPE(uint16_t, DataType::kUint16)
KOLO_TEST_DTYPE(int16_t, DataType::kInt16)
KOLO_TEST_DTYPE(int32_t, DataType::kInt32)
KOLO_TEST_DTYPE(int64_t, DataType::kInt64)
KOLO_TEST_DTYPE(float, DataType::kFloat32)
KOLO_TEST_DTYPE(double, DataType::kFloat64)
#undef KOLO_TEST_DTYPE
// kolo's bool is one byte (0 or 1); a struct, because std::vector<bool> packs bits.
struct Bool {
  bool value;
};
template <> struct Dtype<Bool> {
  static constexpr DataType kValue = DataType::kBool;
  static Bool from(double v) { return {v != 0}; }
  static double to(Bool v) { return v.value ? 1 : 0; }
};
template <> struct Dtype<Float16> {
  static constexpr DataType kValue = DataType::kFloat16;
  static Float16 from(double v) { return {float_to_half(static_cast<float>(v))}; }
  static double to(Float16 v) { return half_to_float(v.bits); }
};
template <> struct Dtype<Bfloat16> {
  static constexpr DataType kValue = DataType::kBfloat16;
  static Bfloat16 from(double v) { return {float_to_bfloat16(static_cast<float>(v))}; }
  static double to(Bfloat16 v) { return bfloat16_to_float(v.bits); }
};

constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct};

// Rank r's element i. Sums over 4 ranks stay within [-60, 120]; products use
// {1, 2} (and -1 for signed types), at most 16 in magnitude: all exact in every
// dtype, none overflows.
template <typename T>
double input_value(int r, int64_t i, ReduceOp op) {
  constexpr DataType d = Dtype<T>::kValue;
  const bool is_signed = d == DataType::kInt8 || d == DataType::kInt16 ||
                         d == DataType::kInt32 || d == DataType::kInt64 || is_floating(d);
  if (d == DataType::kBool) return (i + r) % 3 == 0 ? 1 : 0;
  if (op == ReduceOp::kProduct) {
    const int k = static_cast<int>((i + r) % 3);
    return k == 0 ? 1 : k == 1 ? 2 : (is_signed ? -1 : 1);
  }
  const double v = static_cast<double>((i * 5 + r * 3) % 31);
  return is_signed ? v - 15 : v;
}

double combine(double a, double b, ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return a + b;
    case ReduceOp::kMin: return std::min(a, b);
    case ReduceOp::kMax: return std::max(a, b);
    case ReduceOp::kProduct: return a * b;
    default: return std::nan("");
  }
}

// input_value repeats every kPeriod elements (31 and 3 divide it), so the large
// vectors are tiled from one period instead of recomputed element by element.
constexpr int64_t kPeriod = 93;

template <typename T>
std::vector<T> tiled(int64_t count, const std::vector<T>& period) {
  std::vector<T> v(count);
  for (int64_t i = 0; i < count; ++i) v[i] = period[i % kPeriod];
  return v;
}

template <typename T>
std::vector<T> inputs(int r, int64_t count, ReduceOp op) {
  std::vector<T> period(kPeriod);
  for (int64_t i = 0; i < kPeriod; ++i) period[i] = Dtype<T>::from(input_value<T>(r, i, op));
  return tiled(count, period);
}

template <typename T>
std::vector<T> expected(int64_t count, ReduceOp op) {
  std::vector<T> period(kPeriod);
  for (int64_t i = 0; i < kPeriod; ++i) {
    double acc = input_value<T>(0, i, op);
    for (int r = 1; r < size(); ++r) acc = combine(acc, input_value<T>(r, i, op), op);
    period[i] = Dtype<T>::from(acc);
  }
  return tiled(count, period);
}

// Index of the first element whose bytes differ, or -1.
template <typename T>
int64_t first_difference(const std::vector<T>& a, const std::vector<T>& b) {
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(T)) != 0) return static_cast<int64_t>(i);
  }
  return -1;
}

template <typename T>
BucketView bucket_of(const T* input, T* output, int64_t count, ReduceOp op) {
  BucketView bucket;
  bucket.input = input;
  bucket.output = output;
  bucket.count = count;
  bucket.dtype = Dtype<T>::kValue;
  bucket.op = op;
  return bucket;
}

template <typename T>
void check_allreduce(transport::Transport& transport, int64_t count, ReduceOp op,
                     bool in_place) {
  SCOPED_TRACE(std::string(transport.name()) + " " + dtype_name(Dtype<T>::kValue) + " " +
               op_name(op) + " count " + std::to_string(count) +
               (in_place ? " in place" : " out of place"));
  const std::vector<T> input = inputs<T>(rank(), count, op);
  std::vector<T> buffer = input;
  std::vector<T> output(count, Dtype<T>::from(99));
  BucketView bucket = in_place ? bucket_of<T>(buffer.data(), buffer.data(), count, op)
                               : bucket_of<T>(input.data(), output.data(), count, op);
  ASSERT_TRUE(transport.supports(bucket).ok());
  Status status = transport.allreduce(bucket)->wait();
  ASSERT_TRUE(status.ok()) << status.to_string();
  const std::vector<T> want = expected<T>(count, op);
  const std::vector<T>& got = in_place ? buffer : output;
  const int64_t bad = first_difference(got, want);
  EXPECT_EQ(bad, -1) << "element " << bad << ": got " << Dtype<T>::to(got[bad]) << ", want "
                     << Dtype<T>::to(want[bad]);
  if (!in_place) {
    EXPECT_EQ(first_difference(buffer, input), -1) << "input was modified";
  }
}

template <typename T>
class TransportAllreduceTest : public ::testing::Test {
 protected:
  void check_transport(const char* name) {
    transport::Transport* transport = find_transport(name);
    ASSERT_NE(transport, nullptr) << "the MPI world offers no transport " << name;
    const int64_t n = size();
    for (int64_t count : {int64_t{0}, int64_t{1}, n - 1, n + 1, int64_t{1000}}) {
      for (ReduceOp op : kOps) {
        for (bool in_place : {true, false}) check_allreduce<T>(*transport, count, op, in_place);
      }
    }
    // Large (several ring segments per chunk): every op in place, and SUM out of
    // place too; the full cross product would only add time.
    const int64_t large = (int64_t{1} << 20) + 3;
    for (ReduceOp op : kOps) check_allreduce<T>(*transport, large, op, true);
    check_allreduce<T>(*transport, large, ReduceOp::kSum, false);
  }
};

using AllDtypes = ::testing::Types<uint8_t, int8_t, uint16_t, int16_t, int32_t, int64_t,
                                   Float16, Bfloat16, float, double, Bool>;
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
      check_allreduce<int32_t>(*split, count, ReduceOp::kSum, in_place);
      check_allreduce<Float16>(*split, count, ReduceOp::kProduct, in_place);
    }
  }
}

TEST(MpiTransport, SupportsCpuSumMinMaxProductOnly) {
  const transport::Transport& t = *find_transport("mpi");
  float x = 0;
  BucketView bucket = bucket_of(&x, &x, 1, ReduceOp::kSum);
  EXPECT_TRUE(t.supports(bucket).ok());
  BucketView average = bucket;
  average.op = ReduceOp::kAverage;
  EXPECT_EQ(t.supports(average).code(), Code::kUnsupported);
  BucketView cuda = bucket;
  cuda.device.kind = DeviceKind::kCuda;
  Status on_gpu = t.supports(cuda);
  EXPECT_EQ(on_gpu.code(), Code::kUnsupported);
  EXPECT_NE(on_gpu.message().find("cuda:0"), std::string::npos) << on_gpu.message();
  BucketView scaled = bucket;
  scaled.postscale = 0.5;
  EXPECT_EQ(t.supports(scaled).code(), Code::kUnsupported);
  // Asked anyway, the transport answers with the reason instead of reducing.
  EXPECT_EQ(find_transport("mpi")->allreduce(average)->wait().code(), Code::kUnsupported);
}

TEST(MpiTransport, WorkTestTurnsTrueAndWaitThenReturnsAtOnce) {
  std::vector<double> data(4096, rank() + 1.0);
  auto work = find_transport("mpi")->allreduce(
      bucket_of(data.data(), data.data(), 4096, ReduceOp::kSum));
  Backoff backoff;
  while (!work->test()) backoff.pause();
  EXPECT_TRUE(work->wait().ok());
  EXPECT_EQ(data[4095], size() * (size() + 1) / 2.0);
}

}  // namespace
}  // namespace kolo::mpi
