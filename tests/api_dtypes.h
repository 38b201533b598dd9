// kolo's element types as the C API sees them, for tests that use only kolo.h (the
// multirank api tests, the gpu tests): the storage type, the kolo_dtype_t, and
// conversions exact for the small integers (and halves of them) tests use.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kolo/kolo.h"

namespace kolo_test_types {

template <typename T, kolo_dtype_t D>
struct Plain {
  using Storage = T;
  static constexpr kolo_dtype_t kDtype = D;
  static constexpr bool kFloating = std::is_floating_point<T>::value;
  static constexpr bool kSigned = std::is_signed<T>::value;
  static constexpr bool kBool = false;
  static T from(double v) { return static_cast<T>(v); }
  static double to(T v) { return static_cast<double>(v); }
};

// IEEE binary16 for numbers with at most 11 significant bits.
struct Half {
  using Storage = uint16_t;
  static constexpr kolo_dtype_t kDtype = KOLO_FLOAT16;
  static constexpr bool kFloating = true;
  static constexpr bool kSigned = true;
  static constexpr bool kBool = false;
  static uint16_t from(double v) {
    if (v == 0) return 0;
    const uint16_t sign = v < 0 ? 0x8000 : 0;
    const double a = std::fabs(v);
    const int e = static_cast<int>(std::floor(std::log2(a)));
    const auto mant = static_cast<uint16_t>(std::lround((a / std::ldexp(1.0, e) - 1.0) * 1024));
    return sign | static_cast<uint16_t>((e + 15) << 10) | mant;
  }
  static double to(uint16_t h) {
    const int exp = (h >> 10) & 0x1f;
    const double sign = (h & 0x8000) ? -1 : 1;
    if (exp == 0) return sign * std::ldexp(h & 0x3ff, -24);  // zero and subnormals
    if (exp == 31) return (h & 0x3ff) ? NAN : sign * INFINITY;
    return sign * std::ldexp(1.0 + (h & 0x3ff) / 1024.0, exp - 15);
  }
};

// bfloat16: the top half of a float32; exact for at most 8 significant bits.
struct Bf16 {
  using Storage = uint16_t;
  static constexpr kolo_dtype_t kDtype = KOLO_BFLOAT16;
  static constexpr bool kFloating = true;
  static constexpr bool kSigned = true;
  static constexpr bool kBool = false;
  static uint16_t from(double v) {
    const float f = static_cast<float>(v);
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return static_cast<uint16_t>(u >> 16);
  }
  static double to(uint16_t b) {
    const uint32_t u = static_cast<uint32_t>(b) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
};

struct Bool {
  using Storage = uint8_t;
  static constexpr kolo_dtype_t kDtype = KOLO_BOOL;
  static constexpr bool kFloating = false;
  static constexpr bool kSigned = false;
  static constexpr bool kBool = true;
  static uint8_t from(double v) { return v != 0 ? 1 : 0; }
  static double to(uint8_t v) { return v; }
};

}  // namespace kolo_test_types
