// Inputs and their exact allreduce for the small-tensor api tests (carry_api_test,
// blocking_api_test): small integers, so every dtype and op is exact except a
// floating AVERAGE over a world size that is not a power of two.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kolo/kolo.h"

namespace kolo_test {

// Rank r's element i at repeat k: 1 or 2, plus r every third element, shifted by
// the repeat (products stay small; bools mix 0 and 1).
inline double input_value(int rank, int64_t i, int repeat, bool is_bool) {
  if (is_bool) return ((rank + i + repeat) % 3) == 0 ? 1 : 0;
  return 1 + (rank + i + repeat) % 2 + ((i + repeat) % 3 == 0 ? rank : 0);
}

inline double expected(kolo_op_t op, int size, int64_t i, int repeat, bool is_bool, bool is_integer) {
  double sum = 0, lo = 1e300, hi = -1e300, product = 1;
  for (int r = 0; r < size; ++r) {
    const double v = input_value(r, i, repeat, is_bool);
    sum += v;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
    product *= v;
  }
  switch (op) {
    case KOLO_OP_SUM: return is_bool ? (sum > 0) : sum;
    case KOLO_OP_AVERAGE: return is_integer ? std::trunc(sum / size) : sum / size;
    case KOLO_OP_MIN: return lo;
    case KOLO_OP_MAX: return hi;
    case KOLO_OP_PRODUCT: return product;
  }
  return NAN;
}

}  // namespace kolo_test
