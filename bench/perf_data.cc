#include "bench/perf_data.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "reduce/reduce.h"

namespace kolo::bench {
namespace {

constexpr int64_t kPeriod = 15;  // lcm of the patterns' periods, 3 and 5
constexpr int64_t kSequencePeriod = 101;  // See Note [Exact sequences for data movement]

int64_t input_value(DataType dtype, ReduceOp op, int rank, int64_t i) {
  if (dtype == DataType::kBool) return (i + rank) % 3 == 0 ? 1 : 0;
  if (op == ReduceOp::kProduct) return (i + rank) % 3 == 0 ? 2 : 1;
  return 1 + (i + 3 * static_cast<int64_t>(rank)) % 5;
}

int64_t combine(DataType dtype, ReduceOp op, int64_t a, int64_t b) {
  if (dtype == DataType::kBool) {
    bool either = a != 0 || b != 0, both = a != 0 && b != 0;
    return (op == ReduceOp::kMin || op == ReduceOp::kProduct) ? both : either;
  }
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAverage:
      return a + b;
    case ReduceOp::kMin:
      return std::min(a, b);
    case ReduceOp::kMax:
      return std::max(a, b);
    case ReduceOp::kProduct:
      return a * b;
    case ReduceOp::kAdasum:  // not an element-wise op; -o does not offer it
      break;
  }
  return 0;
}

// Stores the exact integer v as one element of dtype (integers wrap).
void store(DataType dtype, int64_t v, void* element) {
  auto put = [element](auto x) { std::memcpy(element, &x, sizeof(x)); };
  const uint64_t bits = static_cast<uint64_t>(v);
  switch (dtype) {
    case DataType::kUint8:
      return put(static_cast<uint8_t>(bits));
    case DataType::kInt8:
      return put(static_cast<uint8_t>(bits));
    case DataType::kUint16:
      return put(static_cast<uint16_t>(bits));
    case DataType::kInt16:
      return put(static_cast<uint16_t>(bits));
    case DataType::kInt32:
      return put(static_cast<uint32_t>(bits));
    case DataType::kInt64:
      return put(bits);
    case DataType::kFloat16:
      return put(float_to_half(static_cast<float>(v)));
    case DataType::kBfloat16:
      return put(float_to_bfloat16(static_cast<float>(v)));
    case DataType::kFloat32:
      return put(static_cast<float>(v));
    case DataType::kFloat64:
      return put(static_cast<double>(v));
    case DataType::kBool:
      return put(static_cast<uint8_t>(v != 0));
  }
}

// Fills data[0, count) by repeating its first min(count, period) elements.
void tile(void* data, int64_t count, size_t elem, int64_t period = kPeriod) {
  char* bytes = static_cast<char*>(data);
  int64_t filled = std::min(count, period);
  while (filled < count) {
    int64_t n = std::min(filled, count - filled);  // doubling copies, period-aligned
    std::memcpy(bytes + filled * elem, bytes, static_cast<size_t>(n) * elem);
    filled += n;
  }
}

}  // namespace

void fill_input(void* data, int64_t count, DataType dtype, ReduceOp op, int rank) {
  const size_t elem = dtype_size(dtype);
  char* bytes = static_cast<char*>(data);
  for (int64_t i = 0; i < std::min(count, kPeriod); ++i) {
    store(dtype, input_value(dtype, op, rank, i), bytes + i * elem);
  }
  tile(data, count, elem);
}

void fill_expected(void* data, int64_t count, DataType dtype, ReduceOp op, int world_size) {
  const size_t elem = dtype_size(dtype);
  char* bytes = static_cast<char*>(data);
  const int64_t head = std::min(count, kPeriod);
  for (int64_t i = 0; i < head; ++i) {
    int64_t v = input_value(dtype, op, 0, i);
    for (int r = 1; r < world_size; ++r) v = combine(dtype, op, v, input_value(dtype, op, r, i));
    store(dtype, v, bytes + i * elem);
  }
  if (op == ReduceOp::kAverage) {  // kolo.h: the sum, then 1/n (floats) or a division
    if (is_floating(dtype)) {
      reduce::scale(data, data, head, dtype, 1.0 / world_size);
    } else {
      reduce::divide_integer(data, head, dtype, world_size);
    }
  }
  tile(data, count, elem);
}

void fill_sequence(void* data, int64_t count, DataType dtype, int64_t start) {
  const size_t elem = dtype_size(dtype);
  char* bytes = static_cast<char*>(data);
  for (int64_t i = 0; i < std::min(count, kSequencePeriod); ++i) {
    const int64_t k = (start + i) % kSequencePeriod;
    store(dtype, dtype == DataType::kBool ? k % 2 : 1 + k, bytes + i * elem);
  }
  tile(data, count, elem, kSequencePeriod);
}

int64_t count_wrong(const void* got, const void* expected, int64_t count, DataType dtype) {
  const size_t elem = dtype_size(dtype);
  if (std::memcmp(got, expected, static_cast<size_t>(count) * elem) == 0) return 0;
  const char* g = static_cast<const char*>(got);
  const char* e = static_cast<const char*>(expected);
  int64_t wrong = 0;
  for (int64_t i = 0; i < count; ++i) {
    if (std::memcmp(g + i * elem, e + i * elem, elem) != 0) ++wrong;
  }
  return wrong;
}

void poison(void* data, int64_t count, DataType dtype) {
  std::memset(data, 0xff, static_cast<size_t>(count) * dtype_size(dtype));
}

}  // namespace kolo::bench
