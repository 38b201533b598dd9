// Element-wise reduction kernels for CPU memory.
//
// These sit on the hot path of every CPU allreduce: the ring reduces each received
// chunk into the fusion buffer with reduce(), so a kernel has to keep up with memory
// bandwidth. Each kernel is therefore one tight, branch-free loop over typed
// pointers that GCC auto-vectorises at -O3 (src/reduce/CMakeLists.txt sets it; check
// with -fopt-info-vec-optimized). The pointers carry no __restrict: dst may equal a
// (or b) exactly, and GCC's runtime overlap check lets that case take the vector
// loop, since element i is read before it is written.
//
// Semantics:
// - Integers are combined in the unsigned type of the same width (widened to
//   unsigned int for 8- and 16-bit types, so that promotion to int cannot overflow),
//   hence sums and products wrap around modulo 2^bits with no undefined behaviour;
//   MIN and MAX compare in the signed type where the type is signed.
// - MIN and MAX on floating types are std::min / std::max: min(a, b) = b < a ? b : a
//   and max(a, b) = a < b ? b : a. So on a tie (including -0 vs +0) the result is a,
//   and a NaN is kept only when it is in a: min(NaN, 1) = NaN but min(1, NaN) = 1.
//   (This maps onto one minps / maxps instruction.) In the ring, a is the local
//   accumulator and b the incoming chunk, so a NaN may or may not survive MIN/MAX;
//   SUM and PRODUCT always propagate it.
// - bool (one byte, 0 or 1; any non-zero byte reads as 1): SUM and MAX are logical
//   or, PRODUCT and MIN logical and; the result is always 0 or 1.
// - float16 and bfloat16 are converted to float a block at a time (kBlock elements,
//   on the stack, with the CPU's fastest conversion: half_blocks.h), combined in float, and rounded back to nearest even once. For
//   +, *, min and max that single rounding gives the correctly rounded half result:
//   float's 24-bit significand is at least 2p+2 bits for both formats (p = 11, 8), so
//   rounding first to float and then to the half format never double-rounds wrongly.
#include "reduce/reduce.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "common/check.h"
#include "reduce/half_blocks.h"

namespace kolo::reduce {

namespace {

// The unsigned type in which T's arithmetic wraps without undefined behaviour.
template <typename T>
using WrapType = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;

template <typename T>
T wrap(WrapType<T> v) {
  return static_cast<T>(v);  // modulo 2^bits (defined in GCC, and in C++20)
}

struct SumOp {
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      return wrap<T>(static_cast<WrapType<T>>(a) + static_cast<WrapType<T>>(b));
    } else {
      return a + b;
    }
  }
};

struct ProductOp {
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      return wrap<T>(static_cast<WrapType<T>>(a) * static_cast<WrapType<T>>(b));
    } else {
      return a * b;
    }
  }
};

struct MinOp {
  template <typename T>
  T operator()(T a, T b) const { return b < a ? b : a; }  // std::min
};

struct MaxOp {
  template <typename T>
  T operator()(T a, T b) const { return a < b ? b : a; }  // std::max
};

struct OrOp {
  uint8_t operator()(uint8_t a, uint8_t b) const { return (a | b) != 0; }
};

struct AndOp {
  uint8_t operator()(uint8_t a, uint8_t b) const { return (a != 0) & (b != 0); }
};

template <typename T, typename Op>
void combine(void* dst, const void* a, const void* b, int64_t count) {
  T* d = static_cast<T*>(dst);
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  const Op op;
  for (int64_t i = 0; i < count; ++i) d[i] = op(x[i], y[i]);
}

// The 16-bit floating formats, as block conversions to and from float
// (half_blocks.h picks the fastest version for the CPU).
struct Float16Codec {
  static void widen(float* out, const uint16_t* in, int64_t n) { detail::float16_to_float(out, in, n); }
  static void narrow(uint16_t* out, const float* in, int64_t n) { detail::float_to_float16(out, in, n); }
};

struct Bfloat16Codec {
  static void widen(float* out, const uint16_t* in, int64_t n) { detail::bfloat16_to_float(out, in, n); }
  static void narrow(uint16_t* out, const float* in, int64_t n) { detail::float_to_bfloat16(out, in, n); }
};

// Elements converted per block: the two float blocks (2 KiB) stay in L1.
constexpr int64_t kBlock = 256;

template <typename Codec, typename Op>
void combine_half(void* dst, const void* a, const void* b, int64_t count) {
  uint16_t* d = static_cast<uint16_t*>(dst);
  const uint16_t* x = static_cast<const uint16_t*>(a);
  const uint16_t* y = static_cast<const uint16_t*>(b);
  float fx[kBlock];
  float fy[kBlock];
  for (int64_t start = 0; start < count; start += kBlock) {
    const int64_t n = std::min(kBlock, count - start);
    Codec::widen(fx, x + start, n);
    Codec::widen(fy, y + start, n);
    combine<float, Op>(fx, fx, fy, n);
    Codec::narrow(d + start, fx, n);
  }
}

using Kernel = void (*)(void*, const void*, const void*, int64_t);

// The kernel for one storage type T (or one 16-bit floating codec) and op.
template <typename T>
struct Arith {
  template <typename Op>
  static constexpr Kernel kernel() { return &combine<T, Op>; }
};

template <typename Codec>
struct Half {
  template <typename Op>
  static constexpr Kernel kernel() { return &combine_half<Codec, Op>; }
};

template <typename Family>
Kernel select_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return Family::template kernel<SumOp>();
    case ReduceOp::kProduct: return Family::template kernel<ProductOp>();
    case ReduceOp::kMin: return Family::template kernel<MinOp>();
    case ReduceOp::kMax: return Family::template kernel<MaxOp>();
    case ReduceOp::kAverage:
    case ReduceOp::kAdasum: break;
  }
  return nullptr;
}

Kernel select_bool(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kMax: return &combine<uint8_t, OrOp>;
    case ReduceOp::kProduct:
    case ReduceOp::kMin: return &combine<uint8_t, AndOp>;
    case ReduceOp::kAverage:
    case ReduceOp::kAdasum: break;
  }
  return nullptr;
}

Kernel select_kernel(DataType dtype, ReduceOp op) {
  switch (dtype) {
    case DataType::kUint8: return select_op<Arith<uint8_t>>(op);
    case DataType::kInt8: return select_op<Arith<int8_t>>(op);
    case DataType::kUint16: return select_op<Arith<uint16_t>>(op);
    case DataType::kInt16: return select_op<Arith<int16_t>>(op);
    case DataType::kInt32: return select_op<Arith<int32_t>>(op);
    case DataType::kInt64: return select_op<Arith<int64_t>>(op);
    case DataType::kFloat16: return select_op<Half<Float16Codec>>(op);
    case DataType::kBfloat16: return select_op<Half<Bfloat16Codec>>(op);
    case DataType::kFloat32: return select_op<Arith<float>>(op);
    case DataType::kFloat64: return select_op<Arith<double>>(op);
    case DataType::kBool: return select_bool(op);
  }
  return nullptr;
}

template <typename T>
void scale_loop(T* dst, const T* src, int64_t count, T factor) {
  for (int64_t i = 0; i < count; ++i) dst[i] = src[i] * factor;
}

template <typename Codec>
void scale_half(uint16_t* dst, const uint16_t* src, int64_t count, float factor) {
  float block[kBlock];
  for (int64_t start = 0; start < count; start += kBlock) {
    const int64_t n = std::min(kBlock, count - start);
    Codec::widen(block, src + start, n);
    scale_loop<float>(block, block, n, factor);
    Codec::narrow(dst + start, block, n);
  }
}

// Note [Integer scale factors]
// An integer is scaled as Horovod's CPU path scales it (output = factor * input,
// in double, converted back): the product is computed in float64 and truncated
// toward zero. Where C++ leaves the conversion undefined (out of range) kolo
// saturates at the type's limits. One rule for every transport: only this helper
// (via copy_scaled / finish_output) scales integers.
template <typename T>
void scale_integer(T* dst, const T* src, int64_t count, double factor) {
  const double lowest = static_cast<double>(std::numeric_limits<T>::min());
  const double beyond = std::ldexp(1.0, std::numeric_limits<T>::digits);  // max + 1, exact
  for (int64_t i = 0; i < count; ++i) {
    const double v = static_cast<double>(src[i]) * factor;
    dst[i] = v <= lowest   ? std::numeric_limits<T>::min()
             : v >= beyond ? std::numeric_limits<T>::max()
                           : static_cast<T>(v);
  }
}

// Truncates toward zero, as C++ division does; computed in 64 bits, where every
// quotient of a narrower type fits (|x / d| <= |x|).
template <typename T>
void divide_loop(T* data, int64_t count, int64_t divisor) {
  using Wide = std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>;
  const Wide d = static_cast<Wide>(divisor);
  for (int64_t i = 0; i < count; ++i) data[i] = static_cast<T>(static_cast<Wide>(data[i]) / d);
}

}  // namespace

void reduce(void* dst, const void* a, const void* b, int64_t count, DataType dtype,
            ReduceOp op) {
  KOLO_CHECK_GE(count, 0);
  const Kernel kernel = select_kernel(dtype, op);
  if (kernel == nullptr) {
    ::kolo::detail::check_failed(__FILE__, __LINE__,
                                 "no reduce kernel for dtype " + dtype_name(dtype) + ", op " +
                                     op_name(op) + " (AVERAGE is a sum followed by a scale)");
  }
  if (count == 0) return;
  kernel(dst, a, b, count);
}

void scale(void* dst, const void* src, int64_t count, DataType dtype, double factor) {
  KOLO_CHECK_GE(count, 0);
  switch (dtype) {
    case DataType::kFloat16:
      return scale_half<Float16Codec>(static_cast<uint16_t*>(dst),
                                      static_cast<const uint16_t*>(src), count,
                                      static_cast<float>(factor));
    case DataType::kBfloat16:
      return scale_half<Bfloat16Codec>(static_cast<uint16_t*>(dst),
                                       static_cast<const uint16_t*>(src), count,
                                       static_cast<float>(factor));
    case DataType::kFloat32:
      return scale_loop(static_cast<float*>(dst), static_cast<const float*>(src), count,
                        static_cast<float>(factor));
    case DataType::kFloat64:
      return scale_loop(static_cast<double*>(dst), static_cast<const double*>(src), count,
                        factor);
    case DataType::kUint8:
      return scale_integer(static_cast<uint8_t*>(dst), static_cast<const uint8_t*>(src), count, factor);
    case DataType::kInt8:
      return scale_integer(static_cast<int8_t*>(dst), static_cast<const int8_t*>(src), count, factor);
    case DataType::kUint16:
      return scale_integer(static_cast<uint16_t*>(dst), static_cast<const uint16_t*>(src), count,
                           factor);
    case DataType::kInt16:
      return scale_integer(static_cast<int16_t*>(dst), static_cast<const int16_t*>(src), count,
                           factor);
    case DataType::kInt32:
      return scale_integer(static_cast<int32_t*>(dst), static_cast<const int32_t*>(src), count,
                           factor);
    case DataType::kInt64:
      return scale_integer(static_cast<int64_t*>(dst), static_cast<const int64_t*>(src), count,
                           factor);
    default:
      ::kolo::detail::check_failed(__FILE__, __LINE__,
                                   "scale() needs a numeric dtype, got " + dtype_name(dtype));
  }
}

void divide_integer(void* data, int64_t count, DataType dtype, int64_t divisor) {
  KOLO_CHECK_GE(count, 0);
  KOLO_CHECK_GE(divisor, 1);
  if (divisor == 1) return;
  switch (dtype) {
    case DataType::kUint8: return divide_loop(static_cast<uint8_t*>(data), count, divisor);
    case DataType::kInt8: return divide_loop(static_cast<int8_t*>(data), count, divisor);
    case DataType::kUint16: return divide_loop(static_cast<uint16_t*>(data), count, divisor);
    case DataType::kInt16: return divide_loop(static_cast<int16_t*>(data), count, divisor);
    case DataType::kInt32: return divide_loop(static_cast<int32_t*>(data), count, divisor);
    case DataType::kInt64: return divide_loop(static_cast<int64_t*>(data), count, divisor);
    default:
      ::kolo::detail::check_failed(
          __FILE__, __LINE__, "divide_integer() needs an integer dtype, got " + dtype_name(dtype));
  }
}

void copy_scaled(void* dst, const void* src, int64_t count, DataType dtype, double factor) {
  KOLO_CHECK_GE(count, 0);
  KOLO_CHECK(is_valid(dtype));
  if (factor == 1.0) {
    if (count > 0 && dst != src) std::memcpy(dst, src, static_cast<size_t>(count) * dtype_size(dtype));
    return;
  }
  scale(dst, src, count, dtype, factor);
}

}  // namespace kolo::reduce
