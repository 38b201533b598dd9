// Test inputs whose reductions are exact in every dtype, so results compare with ==.
//
// Each dtype is a traits type (for typed tests): its storage type, its DataType,
// conversions through double, and whether it holds integers up to 2^24 exactly
// ("wide": int32, int64, float32, float64). Wide types get values that grow with
// the element index, so a misplaced chunk cannot go unnoticed; narrow ones (8-bit
// integers, float16, bfloat16) get small values whose sums over 8 ranks fit.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "common/dtype.h"

namespace kolo::testing {

template <typename T, DataType D, bool Wide, bool Signed>
struct PlainType {
  using Storage = T;
  static constexpr DataType kType = D;
  static constexpr bool kWide = Wide;
  static constexpr bool kSigned = Signed;
  static Storage from_double(double v) { return static_cast<Storage>(v); }
  static double to_double(Storage x) { return static_cast<double>(x); }
};

struct Float16Type {
  using Storage = uint16_t;
  static constexpr DataType kType = DataType::kFloat16;
  static constexpr bool kWide = false;
  static constexpr bool kSigned = true;
  static Storage from_double(double v) { return float_to_half(static_cast<float>(v)); }
  static double to_double(Storage x) { return half_to_float(x); }
};

struct Bfloat16Type {
  using Storage = uint16_t;
  static constexpr DataType kType = DataType::kBfloat16;
  static constexpr bool kWide = false;
  static constexpr bool kSigned = true;
  static Storage from_double(double v) { return float_to_bfloat16(static_cast<float>(v)); }
  static double to_double(Storage x) { return bfloat16_to_float(x); }
};

using Float32Type = PlainType<float, DataType::kFloat32, true, true>;
using Float64Type = PlainType<double, DataType::kFloat64, true, true>;
using Int8Type = PlainType<int8_t, DataType::kInt8, false, true>;
using Uint8Type = PlainType<uint8_t, DataType::kUint8, false, false>;
using Int32Type = PlainType<int32_t, DataType::kInt32, true, true>;
using Int64Type = PlainType<int64_t, DataType::kInt64, true, true>;

// Rank `rank`'s element i for op (the world has at most 8 ranks).
template <typename D>
double input_value(ReduceOp op, int rank, int64_t i) {
  if (op == ReduceOp::kProduct) {
    // Mostly 1, a 2 on every fourth rank (products up to 4), sometimes a 0.
    if (i % 7 == 3 && rank == static_cast<int>(i % 8)) return 0;
    const double v = (i + rank) % 4 == 0 ? 2 : 1;
    return D::kSigned && (i + 2 * rank) % 5 == 0 ? -v : v;
  }
  if (D::kWide) return static_cast<double>((i % 100003) * 3 + rank * 5) - (D::kSigned ? 40 : 0);
  return static_cast<double>((i * 7 + rank * 3) % 5) - (D::kSigned ? 2 : 0);
}

template <typename D>
double expected_value(ReduceOp op, int size, int64_t i) {
  double acc = input_value<D>(op, 0, i);
  for (int r = 1; r < size; ++r) {
    const double v = input_value<D>(op, r, i);
    switch (op) {
      case ReduceOp::kSum:
        acc += v;
        break;
      case ReduceOp::kMin:
        acc = std::min(acc, v);
        break;
      case ReduceOp::kMax:
        acc = std::max(acc, v);
        break;
      case ReduceOp::kProduct:
        acc *= v;
        break;
      case ReduceOp::kAverage:
      case ReduceOp::kAdasum:
        break;
    }
  }
  return acc;
}

template <typename D>
std::vector<typename D::Storage> make_input(ReduceOp op, int rank, int64_t count) {
  std::vector<typename D::Storage> v(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) v[i] = D::from_double(input_value<D>(op, rank, i));
  return v;
}

// How many elements of `out` differ from the expected reduction; *first gets the
// first such index (-1 if none).
template <typename D>
int64_t count_wrong(const typename D::Storage* out, ReduceOp op, int size, int64_t count,
                    int64_t* first) {
  int64_t wrong = 0;
  *first = -1;
  for (int64_t i = 0; i < count; ++i) {
    if (D::to_double(out[i]) != expected_value<D>(op, size, i)) {
      if (wrong++ == 0) *first = i;
    }
  }
  return wrong;
}

constexpr ReduceOp kKernelOps[] = {ReduceOp::kSum, ReduceOp::kMin, ReduceOp::kMax,
                                   ReduceOp::kProduct};

}  // namespace kolo::testing
