// fold(): the reduction of n inputs in one fixed order, for reductions whose
// bits must not depend on how the work was cut (the deterministic allreduce,
// src/algorithms/deterministic_allreduce.h).
#pragma once

#include <cstdint>

#include "common/dtype.h"

namespace kolo::reduce {

// dst[i] = (...((in[0][i] op in[1][i]) op in[2][i]) ... op in[n-1][i]) for
// i < count, n >= 1: left to right, in the order of `inputs`. The accumulator is
// float for float16 and bfloat16 (each input widened, one rounding at the end),
// the dtype itself otherwise; each step is reduce()'s op (reduce.h: integers
// wrap, MIN/MAX keep the accumulator on ties, bool or/and). So dst depends only
// on the inputs' values and order, never on count or on where the range starts.
// op: SUM, MIN, MAX or PRODUCT. dst may equal any input exactly (not overlap it
// partially).
void fold(void* dst, const void* const* inputs, int n, int64_t count, DataType dtype, ReduceOp op);

}  // namespace kolo::reduce
