// Data types and reduction operators, and the half-precision formats.
//
// The enum values equal kolo_dtype_t / kolo_op_t in include/kolo/kolo.h, so the C
// binding converts with a cast after validating the range.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

namespace kolo {

enum class DataType : int32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kInt32 = 4,
  kInt64 = 5,
  kFloat16 = 6,
  kBfloat16 = 7,
  kFloat32 = 8,
  kFloat64 = 9,
  kBool = 10,
};
constexpr int kNumDataTypes = 11;

enum class ReduceOp : int32_t {
  kSum = 0,
  kAverage = 1,
  kMin = 2,
  kMax = 3,
  kProduct = 4,
  kAdasum = 5,  // Adaptive summation (src/algorithms/adasum.h); not element-wise
};
constexpr int kNumReduceOps = 6;

enum class DeviceKind : int32_t {
  kCpu = 0,
  kCuda = 1,
};

struct Device {
  DeviceKind kind = DeviceKind::kCpu;
  int32_t index = 0;
  void* stream = nullptr;  // CUDA only: cudaStream_t the data is ready after
};

bool is_valid(DataType t);
bool is_valid(ReduceOp op);
bool is_valid(DeviceKind k);

// SUM, MIN, MAX, PRODUCT: the ops the element-wise kernels (src/reduce) and every
// element-wise transport implement. AVERAGE becomes SUM before a transport sees
// it; ADASUM is a whole-vector combination that only the Adasum engine computes.
bool is_elementwise(ReduceOp op);

// Bytes per element; 0 for an invalid type.
size_t dtype_size(DataType t);
bool is_floating(DataType t);  // float16, bfloat16, float32, float64
bool is_integer(DataType t);   // the signed and unsigned integer types (not bool)

// Lower-case names: "float32", "sum", "cpu". "invalid(N)" for out-of-range values.
std::string dtype_name(DataType t);
std::string op_name(ReduceOp op);
std::string device_name(const Device& d);  // "cpu" or "cuda:N"

// Parses the names above; returns false for an unknown name.
bool parse_dtype(const std::string& name, DataType* out);
bool parse_op(const std::string& name, ReduceOp* out);

// IEEE binary16 and bfloat16 stored as raw bits. Conversions round to nearest even
// and keep NaN and infinities.
struct Float16 {
  uint16_t bits;
};
struct Bfloat16 {
  uint16_t bits;
};

float half_to_float(uint16_t bits);
uint16_t float_to_half(float value);

inline float bfloat16_to_float(uint16_t bits) {
  uint32_t u = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

inline uint16_t float_to_bfloat16(float value) {
  uint32_t u;
  std::memcpy(&u, &value, sizeof(u));
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even
  return static_cast<uint16_t>(u >> 16);
}

}  // namespace kolo
