#include "reduce/reduce.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace kolo::reduce {
namespace {

// One tag per dtype: the storage type and how a small exact number maps in and out.
template <typename T, DataType D>
struct Plain {
  using Storage = T;
  static constexpr DataType kType = D;
  static constexpr int kLow = std::is_signed_v<T> ? -3 : 0;  // inputs span kLow..kLow+6
  static T make(double v) { return static_cast<T>(v); }
  static double value(T x) { return static_cast<double>(x); }
};

struct Float16Tag {
  using Storage = uint16_t;
  static constexpr DataType kType = DataType::kFloat16;
  static constexpr int kLow = -3;
  static uint16_t make(double v) { return float_to_half(static_cast<float>(v)); }
  static double value(uint16_t x) { return half_to_float(x); }
};

struct Bfloat16Tag {
  using Storage = uint16_t;
  static constexpr DataType kType = DataType::kBfloat16;
  static constexpr int kLow = -3;
  static uint16_t make(double v) { return float_to_bfloat16(static_cast<float>(v)); }
  static double value(uint16_t x) { return bfloat16_to_float(x); }
};

struct BoolTag {
  using Storage = uint8_t;
  static constexpr DataType kType = DataType::kBool;
  static constexpr int kLow = 0;  // inputs 0 and 1 only: see Pattern()
  static uint8_t make(double v) { return v != 0; }
  static double value(uint8_t x) { return x; }
};

using AllTypes = ::testing::Types<
    Plain<uint8_t, DataType::kUint8>, Plain<int8_t, DataType::kInt8>,
    Plain<uint16_t, DataType::kUint16>, Plain<int16_t, DataType::kInt16>,
    Plain<int32_t, DataType::kInt32>, Plain<int64_t, DataType::kInt64>, Float16Tag, Bfloat16Tag,
    Plain<float, DataType::kFloat32>, Plain<double, DataType::kFloat64>, BoolTag>;

template <typename Tag>
class ReduceTypedTest : public ::testing::Test {
 protected:
  using T = typename Tag::Storage;

  // Small values whose sums (<= 12 in magnitude) and products (<= 36) are exact in
  // every dtype, so expected values compare with ==.
  static std::vector<T> pattern(int64_t count, int64_t salt) {
    std::vector<T> v(static_cast<size_t>(count));
    const int span = Tag::kType == DataType::kBool ? 2 : 7;
    for (int64_t i = 0; i < count; ++i) v[i] = Tag::make(Tag::kLow + (i * 5 + salt) % span);
    return v;
  }

  static double reference(ReduceOp op, double a, double b) {
    switch (op) {
      case ReduceOp::kSum: return a + b;
      case ReduceOp::kProduct: return a * b;
      case ReduceOp::kMin: return std::min(a, b);
      case ReduceOp::kMax: return std::max(a, b);
      default: ADD_FAILURE(); return 0;
    }
  }

  static void expect_reduced(const std::vector<T>& out, const std::vector<T>& a,
                             const std::vector<T>& b, ReduceOp op) {
    for (size_t i = 0; i < out.size(); ++i) {
      const T want = Tag::make(reference(op, Tag::value(a[i]), Tag::value(b[i])));
      ASSERT_EQ(std::memcmp(&out[i], &want, sizeof(T)), 0)
          << "op " << op_name(op) << " at " << i << " of " << out.size() << ": "
          << Tag::value(a[i]) << ", " << Tag::value(b[i]) << " -> " << Tag::value(out[i]);
    }
  }
};

TYPED_TEST_SUITE(ReduceTypedTest, AllTypes);

constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct};
constexpr int64_t kCounts[] = {0, 1, 7, 1000, 100003};

TYPED_TEST(ReduceTypedTest, EveryOpAndCountIntoSeparateOutput) {
  using T = typename TypeParam::Storage;
  for (int64_t count : kCounts) {
    const auto a = this->pattern(count, 0);
    const auto b = this->pattern(count, 3);
    for (ReduceOp op : kOps) {
      std::vector<T> out(static_cast<size_t>(count) + 1, TypeParam::make(1));
      const T sentinel = out.back();
      reduce(out.data(), a.data(), b.data(), count, TypeParam::kType, op);
      EXPECT_EQ(std::memcmp(&out.back(), &sentinel, sizeof(T)), 0) << "wrote past count";
      out.pop_back();
      this->expect_reduced(out, a, b, op);
    }
  }
}

TYPED_TEST(ReduceTypedTest, InPlaceWithDstEqualToEitherInput) {
  for (int64_t count : kCounts) {
    const auto a = this->pattern(count, 1);
    const auto b = this->pattern(count, 4);
    for (ReduceOp op : kOps) {
      auto acc = a;  // dst == a
      reduce(acc.data(), acc.data(), b.data(), count, TypeParam::kType, op);
      this->expect_reduced(acc, a, b, op);
      auto acc2 = b;  // dst == b
      reduce(acc2.data(), a.data(), acc2.data(), count, TypeParam::kType, op);
      this->expect_reduced(acc2, a, b, op);
      auto acc3 = a;
      reduce_inplace(acc3.data(), b.data(), count, TypeParam::kType, op);
      this->expect_reduced(acc3, a, b, op);
    }
  }
}

TYPED_TEST(ReduceTypedTest, AverageIsNotAKernel) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  typename TypeParam::Storage x[1] = {};
  EXPECT_DEATH(reduce(x, x, x, 1, TypeParam::kType, ReduceOp::kAverage), "AVERAGE");
}

template <typename T>
std::vector<T> run(std::vector<T> a, const std::vector<T>& b, DataType t, ReduceOp op) {
  reduce_inplace(a.data(), b.data(), static_cast<int64_t>(a.size()), t, op);
  return a;
}

TEST(ReduceTest, IntegerArithmeticWrapsAround) {
  using V8 = std::vector<int8_t>;
  EXPECT_EQ(run<int8_t>({127, -128, 100}, {1, -1, 100}, DataType::kInt8, ReduceOp::kSum),
            (V8{-128, 127, -56}));
  EXPECT_EQ(run<int8_t>({16, -128}, {16, -1}, DataType::kInt8, ReduceOp::kProduct),
            (V8{0, -128}));
  EXPECT_EQ(run<uint8_t>({255, 200}, {1, 100}, DataType::kUint8, ReduceOp::kSum),
            (std::vector<uint8_t>{0, 44}));
  EXPECT_EQ(run<uint16_t>({65535, 300}, {65535, 300}, DataType::kUint16, ReduceOp::kProduct),
            (std::vector<uint16_t>{1, 24464}));  // 90000 mod 65536; no int overflow
  EXPECT_EQ(run<int16_t>({32767, 300}, {1, 300}, DataType::kInt16, ReduceOp::kSum),
            (std::vector<int16_t>{-32768, 600}));
  const int32_t imax = std::numeric_limits<int32_t>::max();
  EXPECT_EQ(run<int32_t>({imax, imax}, {1, imax}, DataType::kInt32, ReduceOp::kSum),
            (std::vector<int32_t>{std::numeric_limits<int32_t>::min(), -2}));
  const int64_t lmin = std::numeric_limits<int64_t>::min();
  EXPECT_EQ(run<int64_t>({lmin, std::numeric_limits<int64_t>::max()}, {-1, 1}, DataType::kInt64,
                         ReduceOp::kSum),
            (std::vector<int64_t>{std::numeric_limits<int64_t>::max(), lmin}));
  EXPECT_EQ(run<int64_t>({int64_t{1} << 62}, {4}, DataType::kInt64, ReduceOp::kProduct),
            (std::vector<int64_t>{0}));
  // MIN/MAX compare as signed where the type is signed.
  EXPECT_EQ(run<int8_t>({-1, 5}, {1, -100}, DataType::kInt8, ReduceOp::kMin), (V8{-1, -100}));
  EXPECT_EQ(run<uint8_t>({255, 5}, {1, 100}, DataType::kUint8, ReduceOp::kMax),
            (std::vector<uint8_t>{255, 100}));
}

TEST(ReduceTest, BoolIsLogic) {
  using V = std::vector<uint8_t>;
  const V a = {0, 0, 1, 1, 2, 0};
  const V b = {0, 1, 0, 1, 1, 7};
  EXPECT_EQ(run(a, b, DataType::kBool, ReduceOp::kSum), (V{0, 1, 1, 1, 1, 1}));
  EXPECT_EQ(run(a, b, DataType::kBool, ReduceOp::kMax), (V{0, 1, 1, 1, 1, 1}));
  EXPECT_EQ(run(a, b, DataType::kBool, ReduceOp::kProduct), (V{0, 0, 0, 1, 1, 0}));
  EXPECT_EQ(run(a, b, DataType::kBool, ReduceOp::kMin), (V{0, 0, 0, 1, 1, 0}));
}

TEST(ReduceTest, FloatMinMaxFollowStdMinMax) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const auto mn = run<float>({nan, 1, -0.0f, 0.0f}, {1, nan, 0.0f, -0.0f}, DataType::kFloat32,
                             ReduceOp::kMin);
  EXPECT_TRUE(std::isnan(mn[0]));  // a NaN in a is kept
  EXPECT_EQ(mn[1], 1.0f);          // a NaN in b is not
  EXPECT_TRUE(std::signbit(mn[2]));  // ties keep a
  EXPECT_FALSE(std::signbit(mn[3]));
  const auto mx = run<double>({nan, 1}, {1, nan}, DataType::kFloat64, ReduceOp::kMax);
  EXPECT_TRUE(std::isnan(mx[0]));
  EXPECT_EQ(mx[1], 1.0);
  const auto sum = run<float>({1, nan}, {nan, 1}, DataType::kFloat32, ReduceOp::kSum);
  EXPECT_TRUE(std::isnan(sum[0]) && std::isnan(sum[1]));
}

// float16 / bfloat16 round once per step: each reduce() rounds its float result, so
// adding half an ulp twice does not add up to one ulp.
TEST(ReduceTest, HalfRoundsOncePerStep) {
  const uint16_t one = float_to_half(1.0f);                         // 0x3c00
  const uint16_t one_odd = float_to_half(1.0f + 0x1p-10f);          // 0x3c01
  const uint16_t half_ulp = float_to_half(0x1p-11f);
  std::vector<uint16_t> acc = {one, one_odd, one};
  const std::vector<uint16_t> inc = {half_ulp, half_ulp, float_to_half(0x1p-11f + 0x1p-20f)};
  reduce_inplace(acc.data(), inc.data(), 3, DataType::kFloat16, ReduceOp::kSum);
  EXPECT_EQ(acc, (std::vector<uint16_t>{0x3c00, 0x3c02, 0x3c01}));  // tie->even, tie->even, up
  reduce_inplace(acc.data(), inc.data(), 1, DataType::kFloat16, ReduceOp::kSum);
  EXPECT_EQ(acc[0], 0x3c00);  // still 1.0 after two half-ulp steps

  const uint16_t b_one = float_to_bfloat16(1.0f);  // bfloat16 ulp at 1 is 2^-7
  std::vector<uint16_t> bacc = {b_one, float_to_bfloat16(1.0f + 0x1p-7f)};
  const std::vector<uint16_t> binc = {float_to_bfloat16(0x1p-8f), float_to_bfloat16(0x1p-8f)};
  reduce_inplace(bacc.data(), binc.data(), 2, DataType::kBfloat16, ReduceOp::kSum);
  EXPECT_EQ(bacc, (std::vector<uint16_t>{0x3f80, 0x3f82}));
}

// Every float16 / bfloat16 bit pattern against the scalar reference (one rounding of
// the float result), so the vectorised / F16C block conversions agree with dtype.h
// on subnormals, infinities and NaNs too.
TEST(ReduceTest, SixteenBitFloatsMatchScalarReferenceForEveryPattern) {
  struct Format {
    DataType type;
    float (*to)(uint16_t);
    uint16_t (*from)(float);
  };
  const Format formats[] = {{DataType::kFloat16, half_to_float, float_to_half},
                            {DataType::kBfloat16, bfloat16_to_float, float_to_bfloat16}};
  std::vector<uint16_t> a(65536), b(65536), out(65536);
  for (uint32_t i = 0; i < 65536; ++i) {
    a[i] = static_cast<uint16_t>(i);
    b[i] = static_cast<uint16_t>(i * 40503u + 12345u);  // odd multiplier: a permutation
  }
  for (const Format& f : formats) {
    for (ReduceOp op : kOps) {
      reduce(out.data(), a.data(), b.data(), 65536, f.type, op);
      for (uint32_t i = 0; i < 65536; ++i) {
        const float x = f.to(a[i]);
        const float y = f.to(b[i]);
        float r = 0;
        switch (op) {
          case ReduceOp::kSum: r = x + y; break;
          case ReduceOp::kProduct: r = x * y; break;
          case ReduceOp::kMin: r = std::min(x, y); break;
          default: r = std::max(x, y); break;
        }
        if (std::isnan(r)) {  // which NaN's payload survives a + b is the compiler's choice
          ASSERT_TRUE(std::isnan(f.to(out[i]))) << dtype_name(f.type) << " " << a[i] << ", " << b[i];
          continue;
        }
        ASSERT_EQ(out[i], f.from(r)) << dtype_name(f.type) << " " << op_name(op) << " " << a[i]
                                     << ", " << b[i];
      }
    }
  }
}

TEST(ReduceTest, DivideIntegerTruncatesTowardZero) {
  std::vector<int8_t> i8 = {-7, 7, -128, 127, -1, 0};
  divide_integer(i8.data(), 6, DataType::kInt8, 2);
  EXPECT_EQ(i8, (std::vector<int8_t>{-3, 3, -64, 63, 0, 0}));
  std::vector<int32_t> i32 = {-7, 7, -9, 2147483647};
  divide_integer(i32.data(), 4, DataType::kInt32, 3);
  EXPECT_EQ(i32, (std::vector<int32_t>{-2, 2, -3, 715827882}));
  std::vector<int64_t> i64 = {std::numeric_limits<int64_t>::min(), -10};
  divide_integer(i64.data(), 2, DataType::kInt64, 4);
  EXPECT_EQ(i64, (std::vector<int64_t>{std::numeric_limits<int64_t>::min() / 4, -2}));
  std::vector<uint8_t> u8 = {255, 3};
  divide_integer(u8.data(), 2, DataType::kUint8, 4);
  EXPECT_EQ(u8, (std::vector<uint8_t>{63, 0}));
  std::vector<uint16_t> u16 = {65535};
  divide_integer(u16.data(), 1, DataType::kUint16, 65535);
  EXPECT_EQ(u16, (std::vector<uint16_t>{1}));
  std::vector<int16_t> i16 = {-5, 32767};
  divide_integer(i16.data(), 2, DataType::kInt16, 100000);  // divisor beyond the type
  EXPECT_EQ(i16, (std::vector<int16_t>{0, 0}));
  std::vector<int32_t> big(100003);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<int32_t>(i) - 50000;
  divide_integer(big.data(), static_cast<int64_t>(big.size()), DataType::kInt32, 4);
  for (size_t i = 0; i < big.size(); ++i) ASSERT_EQ(big[i], (static_cast<int32_t>(i) - 50000) / 4);
}

TEST(ReduceTest, ScaleAndCopyScaled) {
  std::vector<float> f = {1, 2, 3, -4};
  scale(f.data(), f.data(), 4, DataType::kFloat32, 0.5);
  EXPECT_EQ(f, (std::vector<float>{0.5f, 1, 1.5f, -2}));
  std::vector<float> g(4);
  scale(g.data(), f.data(), 4, DataType::kFloat32, 0.1);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(g[i], f[i] * 0.1f);  // factor rounded to float
  std::vector<double> d = {3, 1};
  scale(d.data(), d.data(), 2, DataType::kFloat64, 1.0 / 3);
  EXPECT_EQ(d, (std::vector<double>{3 * (1.0 / 3), 1.0 / 3}));  // computed in double

  std::vector<uint16_t> h(1003);
  for (size_t i = 0; i < h.size(); ++i) h[i] = float_to_half(static_cast<float>(i));
  std::vector<uint16_t> hs(h.size());
  scale(hs.data(), h.data(), static_cast<int64_t>(h.size()), DataType::kFloat16, 0.25);
  for (size_t i = 0; i < h.size(); ++i) ASSERT_EQ(hs[i], float_to_half(half_to_float(h[i]) * 0.25f));
  std::vector<uint16_t> bf = {float_to_bfloat16(3.0f)};
  scale(bf.data(), bf.data(), 1, DataType::kBfloat16, 1.0 / 3);  // 3 * float(1/3) rounds to 1
  EXPECT_EQ(bf[0], float_to_bfloat16(1.0f));

  std::vector<int32_t> src = {1, -2, 3}, dst(3);
  copy_scaled(dst.data(), src.data(), 3, DataType::kInt32, 1.0);  // memcpy, any dtype
  EXPECT_EQ(dst, src);
  std::vector<double> ds = {1.5, -2}, dd(2);
  copy_scaled(dd.data(), ds.data(), 2, DataType::kFloat64, 4.0);
  EXPECT_EQ(dd, (std::vector<double>{6, -8}));
  copy_scaled(nullptr, nullptr, 0, DataType::kFloat32, 2.0);  // count 0 touches nothing
}

// Note [Integer scale factors]: float64, truncated toward zero, saturated.
TEST(ReduceTest, IntegersScaleInDoubleTruncatingTowardZeroAndSaturating) {
  std::vector<int32_t> i = {7, -7, 3, -3, 0, 2147483647};
  scale(i.data(), i.data(), 6, DataType::kInt32, 0.5);
  EXPECT_EQ(i, (std::vector<int32_t>{3, -3, 1, -1, 0, 1073741823}));
  std::vector<int32_t> big = {2000000000, -2000000000, 5};
  scale(big.data(), big.data(), 3, DataType::kInt32, 1.5);
  EXPECT_EQ(big, (std::vector<int32_t>{2147483647, -2147483647 - 1, 7}));
  std::vector<uint8_t> u = {200, 10, 1};
  std::vector<uint8_t> us(3);
  scale(us.data(), u.data(), 3, DataType::kUint8, -1.0);  // negative saturates at 0
  EXPECT_EQ(us, (std::vector<uint8_t>{0, 0, 0}));
  scale(us.data(), u.data(), 3, DataType::kUint8, 1.3);
  EXPECT_EQ(us, (std::vector<uint8_t>{255, 13, 1}));
  std::vector<int64_t> l = {int64_t{1} << 62, -(int64_t{1} << 62), 9};
  scale(l.data(), l.data(), 3, DataType::kInt64, 4.0);  // beyond int64: saturates, no UB
  EXPECT_EQ(l, (std::vector<int64_t>{INT64_MAX, INT64_MIN, 36}));
  std::vector<int64_t> exact = {(int64_t{1} << 53) + 1};  // float64 rounds it first
  scale(exact.data(), exact.data(), 1, DataType::kInt64, 1.0 / 2);
  EXPECT_EQ(exact[0], int64_t{1} << 52);
  std::vector<int8_t> s8 = {-128, 127, 33};
  copy_scaled(s8.data(), s8.data(), 3, DataType::kInt8, -0.1);
  EXPECT_EQ(s8, (std::vector<int8_t>{12, -12, -3}));
  std::vector<int16_t> s16 = {1000, -1000};
  std::vector<uint16_t> u16 = {1000, 65535};
  scale(s16.data(), s16.data(), 2, DataType::kInt16, 0.999);
  scale(u16.data(), u16.data(), 2, DataType::kUint16, 0.999);
  EXPECT_EQ(s16, (std::vector<int16_t>{999, -999}));
  EXPECT_EQ(u16, (std::vector<uint16_t>{999, 65469}));
}

}  // namespace
}  // namespace kolo::reduce
