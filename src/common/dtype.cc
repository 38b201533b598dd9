#include "common/dtype.h"

#include "common/half.h"

namespace kolo {

namespace {

struct DataTypeInfo {
  DataType type;
  const char* name;
  size_t size;
};

// Indexed by the enum value.
constexpr DataTypeInfo kDataTypes[kNumDataTypes] = {
    {DataType::kUint8, "uint8", 1},       {DataType::kInt8, "int8", 1},
    {DataType::kUint16, "uint16", 2},     {DataType::kInt16, "int16", 2},
    {DataType::kInt32, "int32", 4},       {DataType::kInt64, "int64", 8},
    {DataType::kFloat16, "float16", 2},   {DataType::kBfloat16, "bfloat16", 2},
    {DataType::kFloat32, "float32", 4},   {DataType::kFloat64, "float64", 8},
    {DataType::kBool, "bool", 1},
};

constexpr const char* kOpNames[kNumReduceOps] = {"sum", "average", "min", "max", "product",
                                                     "adasum"};

std::string invalid_name(int32_t value) { return "invalid(" + std::to_string(value) + ")"; }

}  // namespace

bool is_valid(DataType t) {
  const auto v = static_cast<int32_t>(t);
  return v >= 0 && v < kNumDataTypes;
}

bool is_valid(ReduceOp op) {
  const auto v = static_cast<int32_t>(op);
  return v >= 0 && v < kNumReduceOps;
}

bool is_elementwise(ReduceOp op) {
  return op == ReduceOp::kSum || op == ReduceOp::kMin || op == ReduceOp::kMax ||
         op == ReduceOp::kProduct;
}

bool is_valid(DeviceKind k) { return k == DeviceKind::kCpu || k == DeviceKind::kCuda; }

size_t dtype_size(DataType t) {
  return is_valid(t) ? kDataTypes[static_cast<int32_t>(t)].size : 0;
}

bool is_floating(DataType t) {
  return t == DataType::kFloat16 || t == DataType::kBfloat16 || t == DataType::kFloat32 ||
         t == DataType::kFloat64;
}

bool is_integer(DataType t) {
  switch (t) {
    case DataType::kUint8:
    case DataType::kInt8:
    case DataType::kUint16:
    case DataType::kInt16:
    case DataType::kInt32:
    case DataType::kInt64:
      return true;
    default:
      return false;
  }
}

std::string dtype_name(DataType t) {
  if (!is_valid(t)) return invalid_name(static_cast<int32_t>(t));
  return kDataTypes[static_cast<int32_t>(t)].name;
}

std::string op_name(ReduceOp op) {
  if (!is_valid(op)) return invalid_name(static_cast<int32_t>(op));
  return kOpNames[static_cast<int32_t>(op)];
}

std::string device_name(const Device& d) {
  switch (d.kind) {
    case DeviceKind::kCpu: return "cpu";
    case DeviceKind::kCuda: return "cuda:" + std::to_string(d.index);
  }
  return invalid_name(static_cast<int32_t>(d.kind));
}

bool parse_dtype(const std::string& name, DataType* out) {
  for (const DataTypeInfo& info : kDataTypes) {
    if (name == info.name) {
      *out = info.type;
      return true;
    }
  }
  return false;
}

bool parse_op(const std::string& name, ReduceOp* out) {
  for (int i = 0; i < kNumReduceOps; ++i) {
    if (name == kOpNames[i]) {
      *out = static_cast<ReduceOp>(i);
      return true;
    }
  }
  return false;
}

float half_to_float(uint16_t bits) { return half::to_float(bits); }

uint16_t float_to_half(float value) { return half::from_float(value); }

}  // namespace kolo
