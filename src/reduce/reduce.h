// Element-wise reduction kernels for CPU memory, per dtype and op.
//
// Semantics (kolo.h documents them for users):
// - SUM, MIN, MAX, PRODUCT on every dtype; integer arithmetic wraps (computed
//   unsigned, no UB); bool: SUM/MAX = or, PRODUCT/MIN = and.
// - float16 / bfloat16 are widened to float, combined, and rounded once per call.
// - AVERAGE is not a kernel: the coordinator sums, then scale() or
//   divide_integer() finishes it.
// Pointers may alias exactly (dst == a) but must not partially overlap.
#pragma once

#include <cstdint>

#include "common/dtype.h"

namespace kolo::reduce {

// dst[i] = op(a[i], b[i]) for i < count. op must not be AVERAGE.
void reduce(void* dst, const void* a, const void* b, int64_t count, DataType dtype,
            ReduceOp op);

// dst[i] = op(dst[i], src[i]).
inline void reduce_inplace(void* dst, const void* src, int64_t count, DataType dtype,
                           ReduceOp op) {
  reduce(dst, dst, src, count, dtype, op);
}

// dst[i] = src[i] * factor, for numeric dtypes: computed in float for float32,
// float16 and bfloat16 (rounded once), in double for float64 and the integers
// (truncated toward zero and saturated; Note [Integer scale factors]). Not bool.
// dst may equal src.
void scale(void* dst, const void* src, int64_t count, DataType dtype, double factor);

// data[i] /= divisor, for integer dtypes, truncating toward zero.
void divide_integer(void* data, int64_t count, DataType dtype, int64_t divisor);

// Copy with an optional scale: factor == 1 is a plain memcpy.
void copy_scaled(void* dst, const void* src, int64_t count, DataType dtype, double factor);

}  // namespace kolo::reduce
