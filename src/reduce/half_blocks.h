// Conversions of whole blocks between the 16-bit floating formats and float, for the
// reduce kernels (which widen a block, combine in float, and narrow it back).
//
// Results are bit-identical to common/half.h and dtype.h's scalar conversions for
// every input, except that a signalling float16 NaN may come out of the widening
// already quiet (F16C quiets it; the portable code keeps it) — the narrowing quiets
// every NaN anyway, so a kernel's output is the same either way.
//
// Each function is multi-versioned on x86-64 and picked once, at load time, for the
// running CPU (GCC function multi-versioning / ifunc), because these conversions,
// not memory, bound the 16-bit kernels. Measured on the build machine (AMD EPYC,
// 3-stream reduce, 64 MiB): float16 sum 3.4 GB/s portable -> ~60 GB/s with F16C
// (memory bound, like float32); bfloat16 sum 8.9 GB/s with SSE2 -> 27 GB/s with AVX2.
// Elsewhere the portable branch-free code is used as is.
#pragma once

#include <cstdint>

namespace kolo::reduce::detail {

void float16_to_float(float* out, const uint16_t* in, int64_t n);
void float_to_float16(uint16_t* out, const float* in, int64_t n);
void bfloat16_to_float(float* out, const uint16_t* in, int64_t n);
void float_to_bfloat16(uint16_t* out, const float* in, int64_t n);

}  // namespace kolo::reduce::detail
