// fold() works a block of kBlock elements at a time: the block's accumulator
// lives on the stack and takes every input before anything is written to dst,
// so dst may be one of the inputs. Each step is reduce() on the block (float for
// the 16-bit formats, widened with half_blocks.h's conversions), so a fold of
// two inputs gives exactly reduce()'s bits.
#include "reduce/fold.h"

#include <algorithm>
#include <cstring>

#include "common/check.h"
#include "reduce/half_blocks.h"
#include "reduce/reduce.h"

namespace kolo::reduce {
namespace {

constexpr int64_t kBlock = 256;

using Widen = void (*)(float*, const uint16_t*, int64_t);
using Narrow = void (*)(uint16_t*, const float*, int64_t);

void fold_half(uint16_t* dst, const uint16_t* const* in, int n, int64_t count, ReduceOp op,
               Widen widen, Narrow narrow) {
  float acc[kBlock];
  float next[kBlock];
  for (int64_t start = 0; start < count; start += kBlock) {
    const int64_t m = std::min(kBlock, count - start);
    widen(acc, in[0] + start, m);
    for (int r = 1; r < n; ++r) {
      widen(next, in[r] + start, m);
      reduce(acc, acc, next, m, DataType::kFloat32, op);
    }
    narrow(dst + start, acc, m);
  }
}

void fold_plain(char* dst, const char* const* in, int n, int64_t count, DataType dtype, ReduceOp op) {
  alignas(64) char acc[kBlock * 8];
  const size_t elem = dtype_size(dtype);
  KOLO_CHECK_LE(elem, size_t{8});
  for (int64_t start = 0; start < count; start += kBlock) {
    const int64_t m = std::min(kBlock, count - start);
    const size_t offset = static_cast<size_t>(start) * elem;
    std::memcpy(acc, in[0] + offset, static_cast<size_t>(m) * elem);
    for (int r = 1; r < n; ++r) reduce(acc, acc, in[r] + offset, m, dtype, op);
    std::memcpy(dst + offset, acc, static_cast<size_t>(m) * elem);
  }
}

}  // namespace

void fold(void* dst, const void* const* inputs, int n, int64_t count, DataType dtype, ReduceOp op) {
  KOLO_CHECK_GE(n, 1);
  KOLO_CHECK(is_elementwise(op));
  if (count <= 0) return;
  switch (dtype) {
    case DataType::kFloat16:
      fold_half(static_cast<uint16_t*>(dst), reinterpret_cast<const uint16_t* const*>(inputs), n,
                count, op, detail::float16_to_float, detail::float_to_float16);
      return;
    case DataType::kBfloat16:
      fold_half(static_cast<uint16_t*>(dst), reinterpret_cast<const uint16_t* const*>(inputs), n,
                count, op, detail::bfloat16_to_float, detail::float_to_bfloat16);
      return;
    default:
      fold_plain(static_cast<char*>(dst), reinterpret_cast<const char* const*>(inputs), n, count,
                 dtype, op);
  }
}

}  // namespace kolo::reduce
