#include "common/dtype.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

namespace kolo {
namespace {

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

TEST(DtypeTest, SizesAndNames) {
  struct Row {
    DataType t;
    size_t size;
    const char* name;
    bool floating;
    bool integer;
  };
  const Row rows[] = {
      {DataType::kUint8, 1, "uint8", false, true},       {DataType::kInt8, 1, "int8", false, true},
      {DataType::kUint16, 2, "uint16", false, true},     {DataType::kInt16, 2, "int16", false, true},
      {DataType::kInt32, 4, "int32", false, true},       {DataType::kInt64, 8, "int64", false, true},
      {DataType::kFloat16, 2, "float16", true, false},   {DataType::kBfloat16, 2, "bfloat16", true, false},
      {DataType::kFloat32, 4, "float32", true, false},   {DataType::kFloat64, 8, "float64", true, false},
      {DataType::kBool, 1, "bool", false, false},
  };
  ASSERT_EQ(std::size(rows), static_cast<size_t>(kNumDataTypes));
  for (const Row& r : rows) {
    SCOPED_TRACE(r.name);
    EXPECT_TRUE(is_valid(r.t));
    EXPECT_EQ(dtype_size(r.t), r.size);
    EXPECT_EQ(dtype_name(r.t), r.name);
    EXPECT_EQ(is_floating(r.t), r.floating);
    EXPECT_EQ(is_integer(r.t), r.integer);
    DataType parsed = DataType::kBool;
    ASSERT_TRUE(parse_dtype(r.name, &parsed));
    EXPECT_EQ(parsed, r.t);
  }
}

TEST(DtypeTest, InvalidValues) {
  const auto bad = static_cast<DataType>(kNumDataTypes);
  EXPECT_FALSE(is_valid(bad));
  EXPECT_FALSE(is_valid(static_cast<DataType>(-1)));
  EXPECT_EQ(dtype_size(bad), 0u);
  EXPECT_EQ(dtype_name(bad), "invalid(11)");
  EXPECT_EQ(op_name(static_cast<ReduceOp>(-3)), "invalid(-3)");
  EXPECT_FALSE(is_valid(static_cast<ReduceOp>(kNumReduceOps)));
  EXPECT_FALSE(is_valid(static_cast<DeviceKind>(2)));
  DataType t = DataType::kInt8;
  EXPECT_FALSE(parse_dtype("float", &t));
  EXPECT_FALSE(parse_dtype("Float32", &t));
  EXPECT_FALSE(parse_dtype("", &t));
  EXPECT_EQ(t, DataType::kInt8);  // untouched on failure
  ReduceOp op = ReduceOp::kMax;
  EXPECT_FALSE(parse_op("mean", &op));
  EXPECT_EQ(op, ReduceOp::kMax);
}

TEST(DtypeTest, OpsAndDevices) {
  const char* names[] = {"sum", "average", "min", "max", "product", "adasum"};
  for (int i = 0; i < kNumReduceOps; ++i) {
    const auto op = static_cast<ReduceOp>(i);
    EXPECT_TRUE(is_valid(op));
    EXPECT_EQ(op_name(op), names[i]);
    ReduceOp parsed = ReduceOp::kSum;
    ASSERT_TRUE(parse_op(names[i], &parsed));
    EXPECT_EQ(parsed, op);
  }
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct})
    EXPECT_TRUE(is_elementwise(op)) << op_name(op);
  EXPECT_FALSE(is_elementwise(ReduceOp::kAverage));
  EXPECT_FALSE(is_elementwise(ReduceOp::kAdasum));
  EXPECT_FALSE(is_elementwise(static_cast<ReduceOp>(kNumReduceOps)));
  EXPECT_EQ(device_name(Device{}), "cpu");
  EXPECT_EQ(device_name(Device{DeviceKind::kCuda, 3, nullptr}), "cuda:3");
}

// Every one of the 65536 half values: the float value is what the bits mean, and
// converting back gives the same bits (NaNs come back quiet, with sign and payload).
TEST(DtypeTest, HalfRoundTripsEveryValue) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const float f = half_to_float(static_cast<uint16_t>(h));
    const int sign = (h & 0x8000) ? -1 : 1;
    const uint32_t exp = (h >> 10) & 0x1f;
    const uint32_t mant = h & 0x3ff;
    if (exp == 0x1f && mant != 0) {
      ASSERT_TRUE(std::isnan(f)) << h;
      ASSERT_EQ(bits_of(f) >> 31, h >> 15) << h;
      ASSERT_EQ((bits_of(f) >> 13) & 0x3ff, mant) << h;  // payload kept
      ASSERT_EQ(float_to_half(f), h | 0x200) << h;      // made quiet
      continue;
    }
    double expected;
    if (exp == 0x1f) expected = std::numeric_limits<double>::infinity();
    else if (exp == 0) expected = std::ldexp(static_cast<double>(mant), -24);
    else expected = std::ldexp(static_cast<double>(mant + 1024), static_cast<int>(exp) - 25);
    ASSERT_EQ(static_cast<double>(f), sign * expected) << h;
    ASSERT_EQ(std::signbit(f), sign < 0) << h;  // -0 stays -0
    ASSERT_EQ(float_to_half(f), h) << h;
  }
}

// Floats between adjacent halves: below the midpoint rounds down, above rounds up,
// the midpoint itself goes to the even neighbour. Covers subnormals, the
// subnormal/normal boundary, and overflow to inf.
TEST(DtypeTest, FloatToHalfRoundsToNearestEven) {
  for (uint32_t h = 0; h < 0x7c00; ++h) {  // every finite non-negative half and its successor
    const double lo = half_to_float(static_cast<uint16_t>(h));
    const double hi = h + 1 == 0x7c00 ? 65536.0 : half_to_float(static_cast<uint16_t>(h + 1));
    const double mid = (lo + hi) / 2;  // exact in float: halves have 11 significant bits
    const float fmid = static_cast<float>(mid);
    ASSERT_EQ(static_cast<double>(fmid), mid);
    const uint16_t even = (h & 1) ? static_cast<uint16_t>(h + 1) : static_cast<uint16_t>(h);
    ASSERT_EQ(float_to_half(fmid), even) << h;
    ASSERT_EQ(float_to_half(-fmid), even | 0x8000) << h;
    ASSERT_EQ(float_to_half(std::nextafter(fmid, 0.0f)), h) << h;
    ASSERT_EQ(float_to_half(std::nextafter(fmid, 1e30f)), h + 1) << h;
  }
  // Tiny values underflow to signed zero; huge ones and inf overflow to inf.
  EXPECT_EQ(float_to_half(1e-30f), 0x0000);
  EXPECT_EQ(float_to_half(-1e-30f), 0x8000);
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -25)), 0x0000);                       // tie -> even 0
  EXPECT_EQ(float_to_half(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);  // just above
  EXPECT_EQ(float_to_half(1e30f), 0x7c00);
  EXPECT_EQ(float_to_half(-std::numeric_limits<float>::infinity()), 0xfc00);
  EXPECT_EQ(float_to_half(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_half(std::numeric_limits<float>::denorm_min()), 0x0000);
  // A NaN whose payload sits only in the low float bits is still a NaN.
  EXPECT_EQ(float_to_half(float_of(0x7f800001u)), 0x7e00);
  EXPECT_EQ(float_to_half(float_of(0xffc00000u)), 0xfe00);
}

TEST(DtypeTest, Bfloat16RoundTripsAndRounds) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const float f = bfloat16_to_float(static_cast<uint16_t>(h));
    ASSERT_EQ(bits_of(f), h << 16) << h;
    const bool nan = (h & 0x7f80) == 0x7f80 && (h & 0x7f) != 0;
    ASSERT_EQ(float_to_bfloat16(f), nan ? (h | 0x40) : h) << h;
    if ((h & 0x7fff) >= 0x7f80) continue;  // inf and NaN have no next value
    // Midpoint to the next value: ties to even; one float ulp either side goes that way.
    const uint32_t mid = (h << 16) | 0x8000u;
    const uint16_t even = (h & 1) ? static_cast<uint16_t>(h + 1) : static_cast<uint16_t>(h);
    ASSERT_EQ(float_to_bfloat16(float_of(mid)), even) << h;
    ASSERT_EQ(float_to_bfloat16(float_of(mid - 1)), h) << h;
    ASSERT_EQ(float_to_bfloat16(float_of(mid + 1)), h + 1) << h;
  }
}

}  // namespace
}  // namespace kolo
