// Branch-free IEEE binary16 <-> float conversions, inline so that loops over them
// auto-vectorise (the reduce kernels convert blocks of float16 to float and back).
// dtype.h's half_to_float / float_to_half are these, out of line.
//
// Both are exact in the IEEE sense:
// - half -> float is exact for every value (float has more of everything);
//   subnormal halves become normal floats; inf stays inf; a NaN keeps its sign and
//   payload (a signalling NaN stays signalling).
// - float -> half rounds to nearest, ties to even, including into and out of the
//   subnormal range; values >= 65520 in magnitude become inf; a NaN keeps its sign and
//   the top 10 payload bits and is made quiet (bit 9 set), as F16C's vcvtps2ph does.
//
// The technique is Fabian Giesen's ("half_to_float_fast" and
// "float_to_half_fast3_rtne"): re-bias the exponent with integer arithmetic, and let
// one float addition of a magic constant do the subnormal cases, whose rounding is
// then the FPU's round-to-nearest-even. It assumes the default rounding mode.
#pragma once

#include <cstdint>
#include <cstring>

namespace kolo::half {

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

inline float to_float(uint16_t h) {
  constexpr uint32_t kShiftedExp = 0x7c00u << 13;          // half exponent mask, in float position
  constexpr float kMagic = 6.103515625e-05f;                // 2^-14 = bits (113 << 23)
  uint32_t u = (static_cast<uint32_t>(h) & 0x7fffu) << 13;  // exponent and mantissa
  const uint32_t exp = u & kShiftedExp;
  u += (127u - 15u) << 23;                                  // re-bias the exponent
  // inf / NaN: push the exponent the rest of the way to 255.
  const uint32_t inf_nan = u + ((128u - 16u) << 23);
  // zero / subnormal: make it 2^-14 * (1 + m/1024) and subtract 2^-14, exactly.
  const float sub = bits_float(u + (1u << 23)) - kMagic;
  u = exp == kShiftedExp ? inf_nan : u;
  u = exp == 0 ? float_bits(sub) : u;
  return bits_float(u | ((static_cast<uint32_t>(h) & 0x8000u) << 16));
}

inline uint16_t from_float(float f) {
  constexpr uint32_t kInf = 255u << 23;
  constexpr uint32_t kHalfOverflow = (127u + 16u) << 23;  // 2^16: beyond here, inf or NaN
  constexpr uint32_t kSmallestNormal = 113u << 23;         // 2^-14
  // 0.5f: adding it puts the 10 subnormal mantissa bits at the bottom of the float,
  // rounded to nearest even by the FPU.
  constexpr uint32_t kDenormMagic = ((127u - 15u) + (23u - 10u) + 1u) << 23;
  uint32_t u = float_bits(f);
  const uint32_t sign = u & 0x80000000u;
  u ^= sign;

  const uint32_t nan = 0x7e00u | ((u >> 13) & 0x3ffu);
  const uint32_t inf_nan = u > kInf ? nan : 0x7c00u;
  const uint32_t subnormal = float_bits(bits_float(u) + bits_float(kDenormMagic)) - kDenormMagic;
  const uint32_t mant_odd = (u >> 13) & 1u;
  // Re-bias; adding 0xfff plus the lowest kept bit rounds to nearest even, and a carry
  // out of the mantissa correctly bumps the exponent (up to inf).
  const uint32_t normal = (u + ((15u - 127u) << 23) + 0xfffu + mant_odd) >> 13;

  uint32_t o = u < kSmallestNormal ? subnormal : normal;
  o = u >= kHalfOverflow ? inf_nan : o;
  return static_cast<uint16_t>(o | (sign >> 16));
}

}  // namespace kolo::half
