#include "reduce/half_blocks.h"

#include "common/half.h"

// Not under ThreadSanitizer: the ifunc resolver that target_clones generates is
// instrumented too and runs while the dynamic linker relocates, before TSan's
// runtime is up, so the process dies before main (build-tsan/, tools/sanitize.sh).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(__SANITIZE_THREAD__)
#include <immintrin.h>
#define KOLO_X86_MULTIVERSION 1
#else
#define KOLO_X86_MULTIVERSION 0
#endif

namespace kolo::reduce::detail {

namespace {

inline float bf16_to_float(uint16_t h) { return half::bits_float(static_cast<uint32_t>(h) << 16); }

// As dtype.h's float_to_bfloat16, written as a select so that it vectorises.
inline uint16_t float_to_bf16(float f) {
  const uint32_t u = half::float_bits(f);
  const uint32_t nan = (u >> 16) | 0x40u;                             // quiet NaN
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;  // nearest even
  return static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
}

}  // namespace

#if KOLO_X86_MULTIVERSION

// float16: F16C's vcvtph2ps / vcvtps2ph (round to nearest even, NaN quieted with its
// payload kept) where the CPU has them; the portable code otherwise. Chosen by hand,
// not by GCC's target("default") overloads, whose dispatcher is only emitted in a
// translation unit that sees every version.

bool have_f16c() {
  static const bool yes = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx") && __builtin_cpu_supports("f16c");
  }();
  return yes;
}

__attribute__((target("avx,f16c"))) void float16_to_float_f16c(float* out, const uint16_t* in,
                                                               int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
  }
  for (; i < n; ++i) out[i] = half::to_float(in[i]);
}

__attribute__((target("avx,f16c"))) void float_to_float16_f16c(uint16_t* out, const float* in,
                                                               int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), h);
  }
  for (; i < n; ++i) out[i] = half::from_float(in[i]);
}

void float16_to_float(float* out, const uint16_t* in, int64_t n) {
  if (have_f16c()) return float16_to_float_f16c(out, in, n);
  for (int64_t i = 0; i < n; ++i) out[i] = half::to_float(in[i]);
}

void float_to_float16(uint16_t* out, const float* in, int64_t n) {
  if (have_f16c()) return float_to_float16_f16c(out, in, n);
  for (int64_t i = 0; i < n; ++i) out[i] = half::from_float(in[i]);
}

// bfloat16: the same loop, compiled twice; the AVX2 clone is 3x the SSE2 one.

__attribute__((target_clones("avx2", "default"))) void bfloat16_to_float(float* out, const uint16_t* in,
                                                                         int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = bf16_to_float(in[i]);
}

__attribute__((target_clones("avx2", "default"))) void float_to_bfloat16(uint16_t* out, const float* in,
                                                                         int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = float_to_bf16(in[i]);
}

#else  // portable

void float16_to_float(float* out, const uint16_t* in, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = half::to_float(in[i]);
}

void float_to_float16(uint16_t* out, const float* in, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = half::from_float(in[i]);
}

void bfloat16_to_float(float* out, const uint16_t* in, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = bf16_to_float(in[i]);
}

void float_to_bfloat16(uint16_t* out, const float* in, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = float_to_bf16(in[i]);
}

#endif

}  // namespace kolo::reduce::detail
