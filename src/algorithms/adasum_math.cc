#include "algorithms/adasum_math.h"

#include <algorithm>

#include "common/check.h"
#include "common/half.h"

namespace kolo::algorithms::adasum {
namespace {

// How each floating dtype reads into, and rounds from, float64. float16 and
// bfloat16 round through float32: float32 holds every half value exactly, so
// only the last step rounds (the double->float step can, in rare ties, round
// differently from a direct double->half rounding; Horovod's own float16 path
// computes in float32 throughout).
struct F16 {
  using T = uint16_t;
  static double load(T v) { return half::to_float(v); }
  static T store(double v) { return half::from_float(static_cast<float>(v)); }
};
struct BF16 {
  using T = uint16_t;
  static double load(T v) { return bfloat16_to_float(v); }
  static T store(double v) { return float_to_bfloat16(static_cast<float>(v)); }
};
template <typename F>
struct Native {
  using T = F;
  static double load(T v) { return v; }
  static T store(double v) { return static_cast<T>(v); }
};

template <typename C>
DotNorms dot_norms_of(const void* a, const void* b, int64_t count) {
  const auto* x = static_cast<const typename C::T*>(a);
  const auto* y = static_cast<const typename C::T*>(b);
  DotNorms s;
  for (int64_t i = 0; i < count; ++i) {
    const double u = C::load(x[i]);
    const double v = C::load(y[i]);
    s.dot += u * v;
    s.a += u * u;
    s.b += v * v;
  }
  return s;
}

template <typename C>
void scaled_add_of(void* a, const void* b, int64_t count, Coefficients c) {
  auto* x = static_cast<typename C::T*>(a);
  const auto* y = static_cast<const typename C::T*>(b);
  for (int64_t i = 0; i < count; ++i) x[i] = C::store(c.a * C::load(x[i]) + c.b * C::load(y[i]));
}

}  // namespace

DotNorms dot_and_norms(const void* a, const void* b, int64_t count, DataType dtype) {
  switch (dtype) {
    case DataType::kFloat16: return dot_norms_of<F16>(a, b, count);
    case DataType::kBfloat16: return dot_norms_of<BF16>(a, b, count);
    case DataType::kFloat32: return dot_norms_of<Native<float>>(a, b, count);
    case DataType::kFloat64: return dot_norms_of<Native<double>>(a, b, count);
    default: break;
  }
  detail::check_failed(__FILE__, __LINE__, "adasum: dtype " + dtype_name(dtype) + " is not floating");
}

Coefficients coefficients(double dot, double a_norm_sq, double b_norm_sq) {
  Coefficients c;
  if (a_norm_sq >= kMinNormSq) c.a = 1.0 - dot / a_norm_sq * 0.5;
  if (b_norm_sq >= kMinNormSq) c.b = 1.0 - dot / b_norm_sq * 0.5;
  return c;
}

void scaled_add(void* a, const void* b, int64_t count, DataType dtype, Coefficients c) {
  switch (dtype) {
    case DataType::kFloat16: return scaled_add_of<F16>(a, b, count, c);
    case DataType::kBfloat16: return scaled_add_of<BF16>(a, b, count, c);
    case DataType::kFloat32: return scaled_add_of<Native<float>>(a, b, count, c);
    case DataType::kFloat64: return scaled_add_of<Native<double>>(a, b, count, c);
    default: break;
  }
  detail::check_failed(__FILE__, __LINE__, "adasum: dtype " + dtype_name(dtype) + " is not floating");
}

void halve(Segment s, bool lower, Segment* keep, Segment* give) {
  const Segment first{s.begin, s.count / 2};
  const Segment second{s.begin + first.count, s.count - first.count};
  *keep = lower ? first : second;
  *give = lower ? second : first;
}

Segment overlap(Segment s, Segment tensor) {
  const int64_t begin = std::max(s.begin, tensor.begin);
  const int64_t end = std::min(s.end(), tensor.end());
  return Segment{begin, std::max<int64_t>(0, end - begin)};
}

bool is_power_of_two(int n) { return n > 0 && (n & (n - 1)) == 0; }

}  // namespace kolo::algorithms::adasum
