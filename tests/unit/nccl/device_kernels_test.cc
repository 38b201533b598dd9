// The device kernels on a GPU (transports/nccl/device_kernels.h): exact copies of
// every dtype, zero fill, scaling rounded as the CPU's reduce::scale, truncating
// integer division, across launches, tiles and alignments. Skipped where no CUDA
// device is visible (the build machine); nccl_types_test checks the errors there.
#include "transports/nccl/device_kernels.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "common/dtype.h"

namespace kolo::nccl {
namespace {

#define ASSERT_CUDA(call) ASSERT_EQ((call), cudaSuccess) << #call

class DeviceKernelsTest : public ::testing::Test {
 public:  // for the check_* helpers
  void SetUp() override {
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
      GTEST_SKIP() << "no CUDA device";
    }
    ASSERT_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }
  void TearDown() override {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
    for (void* p : buffers_) cudaFree(p);
  }
  char* device_bytes(size_t bytes) {
    void* p = nullptr;
    EXPECT_EQ(cudaMalloc(&p, bytes), cudaSuccess);
    buffers_.push_back(p);
    return static_cast<char*>(p);
  }
  cudaStream_t stream_ = nullptr;
  std::vector<void*> buffers_;
};

// Element i of a test pattern, as raw bits of `size` bytes: values that are
// exact in every floating format (small integers and halves), distinct per i.
uint64_t pattern_bits(DataType dtype, int64_t i) {
  const float value = static_cast<float>(i % 251) - 125.0f + (i % 2 ? 0.5f : 0.0f);
  switch (dtype) {
    case DataType::kFloat16: return float_to_half(value);
    case DataType::kBfloat16: return float_to_bfloat16(value);
    case DataType::kFloat32: { uint32_t u; std::memcpy(&u, &value, 4); return u; }
    case DataType::kFloat64: {
      const double d = value; uint64_t u; std::memcpy(&u, &d, 8); return u;
    }
    case DataType::kBool: return i % 3 == 0 ? 1 : 0;
    default: return static_cast<uint64_t>(i * 2654435761u);  // wraps per size
  }
}

// What reduce::scale computes on the CPU for one element.
uint64_t scaled_bits(DataType dtype, uint64_t bits, double factor) {
  const float f = static_cast<float>(factor);
  switch (dtype) {
    case DataType::kFloat16: return float_to_half(half_to_float(uint16_t(bits)) * f);
    case DataType::kBfloat16:
      return float_to_bfloat16(bfloat16_to_float(uint16_t(bits)) * f);
    case DataType::kFloat32: {
      float x; uint32_t u = uint32_t(bits); std::memcpy(&x, &u, 4);
      x *= f; std::memcpy(&u, &x, 4); return u;
    }
    case DataType::kFloat64: {
      double x; std::memcpy(&x, &bits, 8); x *= factor; std::memcpy(&bits, &x, 8); return bits;
    }
    default: return bits;
  }
}

void put(std::vector<char>& bytes, int64_t i, size_t size, uint64_t bits) {
  std::memcpy(bytes.data() + i * size, &bits, size);  // little endian
}
uint64_t get(const std::vector<char>& bytes, int64_t i, size_t size) {
  uint64_t bits = 0;
  std::memcpy(&bits, bytes.data() + i * size, size);
  return bits;
}

// Packs `counts` segments (odd ones from a misaligned source, one zero-filled)
// into one buffer with batched_copy and checks every element against the CPU.
void check_pack(DeviceKernelsTest* t, DataType dtype, double factor,
                const std::vector<int64_t>& counts) {
  const size_t size = dtype_size(dtype);
  int64_t total = 0;
  for (int64_t c : counts) total += c + 1;  // + 1: room for a misalignment shift
  std::vector<char> input(total * size);
  for (int64_t i = 0; i < total; ++i) put(input, i, size, pattern_bits(dtype, i));
  char* src = t->device_bytes(input.size() + 16);
  char* dst = t->device_bytes(input.size() + 16);
  ASSERT_CUDA(cudaMemcpy(src, input.data(), input.size(), cudaMemcpyHostToDevice));
  ASSERT_CUDA(cudaMemset(dst, 0xab, input.size()));
  // The set-up ran on the legacy default stream, which a non-blocking stream does
  // not wait for: finish it before the kernel goes on stream_.
  ASSERT_CUDA(cudaDeviceSynchronize());
  std::vector<CopySegment> segments;
  std::vector<int64_t> src_at, dst_at;
  int64_t in = 0, out = 0;
  for (size_t s = 0; s < counts.size(); ++s) {
    const int64_t shift = s % 2;  // odd segments start one element off 16 bytes
    const bool zeros = s == 2;
    src_at.push_back(zeros ? -1 : in + shift);
    dst_at.push_back(out);
    segments.push_back({zeros ? nullptr : src + (in + shift) * size, dst + out * size, counts[s]});
    in += counts[s] + 1;
    out += counts[s];
  }
  Status status = batched_copy(segments, dtype, factor, t->stream_);
  ASSERT_TRUE(status.ok()) << status.to_string();
  ASSERT_CUDA(cudaStreamSynchronize(t->stream_));
  std::vector<char> output(out * size);
  ASSERT_CUDA(cudaMemcpy(output.data(), dst, output.size(), cudaMemcpyDeviceToHost));
  for (size_t s = 0; s < counts.size(); ++s) {
    for (int64_t i = 0; i < counts[s]; ++i) {
      const uint64_t want =
          src_at[s] < 0 ? 0 : scaled_bits(dtype, get(input, src_at[s] + i, size), factor);
      ASSERT_EQ(get(output, dst_at[s] + i, size), want)
          << dtype_name(dtype) << " factor " << factor << " segment " << s << " element " << i;
    }
  }
}

const std::vector<int64_t> kAwkwardCounts = {1, 7, 4097, 0, 33, 8192, 15, 100003, 2, 17};

TEST_F(DeviceKernelsTest, ExactCopyOfEveryDtype) {
  for (int d = 0; d < kNumDataTypes; ++d) {
    check_pack(this, static_cast<DataType>(d), 1.0, kAwkwardCounts);
  }
}

TEST_F(DeviceKernelsTest, ScaledCopyRoundsOnceAsTheCpu) {
  for (DataType dtype : {DataType::kFloat16, DataType::kBfloat16, DataType::kFloat32,
                         DataType::kFloat64}) {
    check_pack(this, dtype, 0.5, kAwkwardCounts);
    check_pack(this, dtype, 1.0 / 3.0, kAwkwardCounts);
  }
}

TEST_F(DeviceKernelsTest, ManySegmentsAndManyTiles) {
  std::vector<int64_t> counts(250);
  for (size_t i = 0; i < counts.size(); ++i) counts[i] = static_cast<int64_t>(i * 37 % 300);
  counts[100] = 3 * 1024 * 1024 + 5;  // more tiles than blocks: the grid-stride loop
  check_pack(this, DataType::kFloat32, 1.0, counts);
  check_pack(this, DataType::kBfloat16, 0.25, counts);
}

TEST_F(DeviceKernelsTest, ScaleInPlace) {
  const int64_t count = 10001;
  std::vector<float> host(count);
  for (int64_t i = 0; i < count; ++i) host[i] = static_cast<float>(i) - 5000.0f;
  float* data = reinterpret_cast<float*>(device_bytes(count * sizeof(float)));
  ASSERT_CUDA(cudaMemcpy(data, host.data(), count * sizeof(float), cudaMemcpyHostToDevice));
  ASSERT_CUDA(cudaDeviceSynchronize());
  Status status = scale(data, data, count, DataType::kFloat32, 0.125, stream_);
  ASSERT_TRUE(status.ok()) << status.to_string();
  ASSERT_CUDA(cudaStreamSynchronize(stream_));
  std::vector<float> out(count);
  ASSERT_CUDA(cudaMemcpy(out.data(), data, count * sizeof(float), cudaMemcpyDeviceToHost));
  for (int64_t i = 0; i < count; ++i) ASSERT_EQ(out[i], host[i] * 0.125f) << i;
}

template <typename T>
void check_divide(DeviceKernelsTest* t, DataType dtype) {
  const int64_t count = 5000;
  std::vector<T> host(count);
  for (int64_t i = 0; i < count; ++i) host[i] = static_cast<T>(i * 7919 - 12345);
  T* data = reinterpret_cast<T*>(t->device_bytes(count * sizeof(T)));
  ASSERT_CUDA(cudaMemcpy(data, host.data(), count * sizeof(T), cudaMemcpyHostToDevice));
  ASSERT_CUDA(cudaDeviceSynchronize());
  Status status = divide_integer(data, count, dtype, 3, t->stream_);
  ASSERT_TRUE(status.ok()) << status.to_string();
  ASSERT_CUDA(cudaStreamSynchronize(t->stream_));
  std::vector<T> out(count);
  ASSERT_CUDA(cudaMemcpy(out.data(), data, count * sizeof(T), cudaMemcpyDeviceToHost));
  for (int64_t i = 0; i < count; ++i) {
    ASSERT_EQ(out[i], static_cast<T>(host[i] / 3)) << dtype_name(dtype) << " " << i;
  }
}

TEST_F(DeviceKernelsTest, DivideIntegerTruncatesTowardZero) {
  check_divide<uint8_t>(this, DataType::kUint8);
  check_divide<int8_t>(this, DataType::kInt8);
  check_divide<uint16_t>(this, DataType::kUint16);
  check_divide<int16_t>(this, DataType::kInt16);
  check_divide<int32_t>(this, DataType::kInt32);
  check_divide<int64_t>(this, DataType::kInt64);
}

}  // namespace
}  // namespace kolo::nccl
