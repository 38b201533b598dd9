// Exact checks shared by the MPI-world tests (mpi, ring, shm, hierarchical): per-dtype
// conversions, inputs chosen so that every sum and product is exact in every
// dtype (bfloat16 included), and check_allreduce, which runs one bucket through a
// transport and compares the result bit for bit.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "transport/reduction.h"
#include "transport/transport.h"

namespace kolo::mpi::testing {

template <typename T> struct Dtype;
#define KOLO_TEST_DTYPE(T, D)                                 \
  template <> struct Dtype<T> {                               \
    static constexpr DataType kValue = D;                     \
    static T from(double v) { return static_cast<T>(v); }     \
    static double to(T v) { return static_cast<double>(v); }  \
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

using AllDtypes = ::testing::Types<uint8_t, int8_t, uint16_t, int16_t, int32_t, int64_t,
                                   Float16, Bfloat16, float, double, Bool>;

// Whether T holds negative values (the generators below shift theirs below 0).
template <typename T>
bool is_signed_dtype() {
  constexpr DataType d = Dtype<T>::kValue;
  return d == DataType::kInt8 || d == DataType::kInt16 || d == DataType::kInt32 ||
         d == DataType::kInt64 || is_floating(d);
}

constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct};

// Rank r's element i. Sums over 4 ranks stay within [-60, 120]; products use
// {1, 2} (and -1 for signed types), at most 16 in magnitude: all exact.
template <typename T>
double input_value(int r, int64_t i, ReduceOp op) {
  const bool is_signed = is_signed_dtype<T>();
  if (Dtype<T>::kValue == DataType::kBool) return (i + r) % 3 == 0 ? 1 : 0;
  if (op == ReduceOp::kProduct) {
    const int k = static_cast<int>((i + r) % 3);
    return k == 0 ? 1 : k == 1 ? 2 : (is_signed ? -1 : 1);
  }
  const double v = static_cast<double>((i * 5 + r * 3) % 31);
  return is_signed ? v - 15 : v;
}

inline double combine(double a, double b, ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return a + b;
    case ReduceOp::kMin: return std::min(a, b);
    case ReduceOp::kMax: return std::max(a, b);
    case ReduceOp::kProduct: return a * b;
    default: return std::nan("");
  }
}

// input_value repeats every kPeriod elements (31 and 3 divide it).
constexpr int64_t kPeriod = 93;

template <typename T>
std::vector<T> tiled(int64_t count, const std::vector<T>& period) {
  std::vector<T> v(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) v[static_cast<size_t>(i)] = period[i % kPeriod];
  return v;
}

template <typename T>
std::vector<T> inputs(int r, int64_t count, ReduceOp op) {
  std::vector<T> period(kPeriod);
  for (int64_t i = 0; i < kPeriod; ++i) period[i] = Dtype<T>::from(input_value<T>(r, i, op));
  return tiled(count, period);
}

template <typename T>
std::vector<T> expected(int size, int64_t count, ReduceOp op) {
  std::vector<T> period(kPeriod);
  for (int64_t i = 0; i < kPeriod; ++i) {
    double acc = input_value<T>(0, i, op);
    for (int r = 1; r < size; ++r) acc = combine(acc, input_value<T>(r, i, op), op);
    period[i] = Dtype<T>::from(acc);
  }
  return tiled(count, period);
}

template <typename T>
int64_t first_difference(const std::vector<T>& a, const std::vector<T>& b) {
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(T)) != 0) return static_cast<int64_t>(i);
  }
  return -1;
}

template <typename T>
transport::Bucket bucket_of(const T* input, T* output, int64_t count, ReduceOp op) {
  return transport::host_bucket(input, output, count, Dtype<T>::kValue, transport::Reduction{op});
}

// One allreduce through `transport` on a world of `size` ranks, as rank `rank`.
template <typename T>
void check_allreduce(transport::Transport& transport, int rank, int size, int64_t count,
                     ReduceOp op, bool in_place) {
  SCOPED_TRACE(std::string(transport.name()) + " " + dtype_name(Dtype<T>::kValue) + " " +
               op_name(op) + " count " + std::to_string(count) +
               (in_place ? " in place" : " out of place"));
  const std::vector<T> input = inputs<T>(rank, count, op);
  std::vector<T> buffer = input;
  std::vector<T> output(static_cast<size_t>(count), Dtype<T>::from(99));
  transport::Bucket bucket = in_place
                                     ? bucket_of<T>(buffer.data(), buffer.data(), count, op)
                                     : bucket_of<T>(input.data(), output.data(), count, op);
  EXPECT_TRUE(transport.supports(bucket).ok());
  Status status = transport.allreduce(bucket)->wait();
  EXPECT_TRUE(status.ok()) << status.to_string();
  const std::vector<T> want = expected<T>(size, count, op);
  const std::vector<T>& got = in_place ? buffer : output;
  const int64_t bad = first_difference(got, want);
  EXPECT_EQ(bad, -1) << "element " << bad << ": got "
                     << (bad >= 0 ? Dtype<T>::to(got[bad]) : 0) << ", want "
                     << (bad >= 0 ? Dtype<T>::to(want[bad]) : 0);
  if (!in_place) {
    EXPECT_EQ(first_difference(buffer, input), -1) << "input was modified";
  }
}

// A fused bucket of tensors of `counts` elements (transport::Bucket), the even
// ones in place, the odd ones out of place, with a staging buffer of
// `staging_bytes` for transports that pack; each must hold its own reduction, and
// no input may change.
template <typename T>
void check_unpacked(transport::Transport& transport, int rank, int size,
                    const std::vector<int64_t>& counts, ReduceOp op,
                    size_t staging_bytes = size_t{1} << 20) {
  SCOPED_TRACE(std::string(transport.name()) + " unpacked " + dtype_name(Dtype<T>::kValue) +
               " " + op_name(op) + ", " + std::to_string(counts.size()) + " tensors");
  std::vector<std::vector<T>> in(counts.size()), out(counts.size());
  transport::Bucket bucket;
  bucket.dtype = Dtype<T>::kValue;
  bucket.reduction.op = op;
  std::vector<char> staging(staging_bytes);
  bucket.staging = staging.data();
  bucket.staging_bytes = staging_bytes;
  for (size_t t = 0; t < counts.size(); ++t) {
    in[t] = inputs<T>(rank + static_cast<int>(t), counts[t], op);
    const bool in_place = t % 2 == 0;
    if (!in_place) out[t].assign(static_cast<size_t>(counts[t]), Dtype<T>::from(99));
    T* output = in_place ? in[t].data() : out[t].data();
    bucket.tensors.push_back({in[t].data(), output, counts[t], nullptr});
    bucket.count += counts[t];
  }
  EXPECT_TRUE(transport.supports(bucket).ok());
  Status status = transport.allreduce(bucket)->wait();
  ASSERT_TRUE(status.ok()) << status.to_string();
  for (size_t t = 0; t < counts.size(); ++t) {
    // Rank r's tensor t holds the inputs of "rank" r + t: the expected values are
    // those of ranks t .. t + size - 1.
    std::vector<T> period(kPeriod);
    for (int64_t i = 0; i < kPeriod; ++i) {
      double acc = input_value<T>(static_cast<int>(t), i, op);
      for (int r = 1; r < size; ++r) acc = combine(acc, input_value<T>(r + static_cast<int>(t), i, op), op);
      period[i] = Dtype<T>::from(acc);
    }
    const std::vector<T> want = tiled(counts[t], period);
    const bool in_place = t % 2 == 0;
    EXPECT_EQ(first_difference(in_place ? in[t] : out[t], want), -1) << "tensor " << t;
    if (!in_place) {
      EXPECT_EQ(first_difference(in[t], inputs<T>(rank + static_cast<int>(t), counts[t], op)), -1)
          << "tensor " << t << ": input was modified";
    }
  }
}

// A factor applied as a transport applies it (reduce::scale): in float for the
// floating dtypes (exact for the values here), in double truncated toward zero
// for the integers.
template <typename T>
double scaled_value(double v, double factor) {
  const double x = v * factor;
  return is_floating(Dtype<T>::kValue) ? x : std::trunc(x);
}

// check_unpacked with a prescale and an output factor (not bool): every input
// element scaled once before it is combined, every result element once after.
// Powers of two keep the floating results exact.
template <typename T>
void check_scaled(transport::Transport& transport, int rank, int size,
                  const std::vector<int64_t>& counts, ReduceOp op, double prescale,
                  double postscale) {
  SCOPED_TRACE(std::string(transport.name()) + " scaled " + dtype_name(Dtype<T>::kValue) + " " +
               op_name(op) + " prescale " + std::to_string(prescale) + " postscale " +
               std::to_string(postscale) + ", " + std::to_string(counts.size()) + " tensors");
  std::vector<std::vector<T>> in(counts.size()), out(counts.size());
  transport::Bucket bucket;
  bucket.dtype = Dtype<T>::kValue;
  bucket.reduction.op = op;
  bucket.reduction.prescale = prescale;
  bucket.reduction.postscale = postscale;
  std::vector<char> staging(size_t{1} << 20);
  bucket.staging = staging.data();
  bucket.staging_bytes = staging.size();
  for (size_t t = 0; t < counts.size(); ++t) {
    in[t] = inputs<T>(rank + static_cast<int>(t), counts[t], op);
    out[t].assign(static_cast<size_t>(counts[t]), Dtype<T>::from(99));
    T* output = t % 2 == 0 ? in[t].data() : out[t].data();
    bucket.tensors.push_back({in[t].data(), output, counts[t], nullptr});
    bucket.count += counts[t];
  }
  Status status = transport.allreduce(bucket)->wait();
  ASSERT_TRUE(status.ok()) << status.to_string();
  for (size_t t = 0; t < counts.size(); ++t) {
    const int first = static_cast<int>(t);
    std::vector<T> period(kPeriod);
    for (int64_t i = 0; i < kPeriod; ++i) {
      double acc = scaled_value<T>(input_value<T>(first, i, op), prescale);
      for (int r = 1; r < size; ++r)
        acc = combine(acc, scaled_value<T>(input_value<T>(first + r, i, op), prescale), op);
      period[i] = Dtype<T>::from(scaled_value<T>(acc, postscale));
    }
    const std::vector<T> want = tiled(counts[t], period);
    const std::vector<T>& got = t % 2 == 0 ? in[t] : out[t];
    const int64_t bad = first_difference(got, want);
    EXPECT_EQ(bad, -1) << "tensor " << t << " element " << bad << ": got "
                       << (bad >= 0 ? Dtype<T>::to(got[bad]) : 0) << ", want "
                       << (bad >= 0 ? Dtype<T>::to(want[bad]) : 0);
  }
}

// Every op, in place and out of place, at counts 0, 1, n-1, n+1, 1000, then
// 2^20+3 (many slices) with every op in place and SUM out of place.
template <typename T>
void check_counts(transport::Transport& transport, int rank, int size) {
  const int64_t n = size;
  for (int64_t count : {int64_t{0}, int64_t{1}, n - 1, n + 1, int64_t{1000}}) {
    for (ReduceOp op : kOps) {
      for (bool in_place : {true, false}) {
        check_allreduce<T>(transport, rank, size, count, op, in_place);
      }
    }
  }
  const int64_t large = (int64_t{1} << 20) + 3;
  for (ReduceOp op : kOps) check_allreduce<T>(transport, rank, size, large, op, true);
  check_allreduce<T>(transport, rank, size, large, ReduceOp::kSum, false);
}

}  // namespace kolo::mpi::testing
