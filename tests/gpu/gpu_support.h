// Shared harness for the device tests (label "gpu"). They use only kolo's public C
// API and the CUDA runtime, as a framework binding would.
//
// kolo is initialised once per process by gpu_main.cc (the NCCL communicator is
// built once, not per test); every test uses its own tensor names, so a test that
// fails half-way cannot leave a name in flight for the next one.
//
// Each test runs at any world size: rank r's inputs depend on r, and the expected
// values are computed over all ranks. CTest runs each executable with one rank (one
// GPU is enough) and with two (label "multigpu": one GPU per rank, since NCCL refuses
// two ranks on one device). Averages are exact for world sizes that are powers of two.
//
// Where the test cannot run — no device visible, fewer devices than ranks, a libkolo
// without the NCCL transport — GpuTest::SetUp skips with the reason, and gpu_main
// prints "all tests skipped" so that CTest reports the executable as skipped.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "api_dtypes.h"
#include "kolo/kolo.h"

namespace kolo_gpu_test {

// Why the device tests cannot run in this process ("" when they can): no CUDA
// device, fewer devices than ranks, or no NCCL transport in libkolo. kolo must be
// initialised (the world size matters).
std::string why_not_runnable();

// Fails the current test with the CUDA error's name and the call's text.
#define GPU_CHECK(call)                                                                 \
  do {                                                                                  \
    cudaError_t gpu_check_err_ = (call);                                                \
    ASSERT_EQ(gpu_check_err_, cudaSuccess) << #call << ": " << cudaGetErrorName(gpu_check_err_) \
                                           << " (" << cudaGetErrorString(gpu_check_err_) << ")"; \
  } while (0)

// Device memory of one device, freed at scope exit. Allocation failures are test
// failures (ADD_FAILURE) and leave get() null.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* get() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  // Synchronous copies and fills (the legacy default stream, then a device sync).
  void upload(const void* host, size_t bytes);
  void download(void* host, size_t bytes) const;
  void fill_bytes(int value);

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// Copies `bytes` of device memory at `src` into a host vector.
std::vector<uint8_t> download_bytes(const void* src, size_t bytes);

// Element types as the C API sees them (tests/api_dtypes.h).
using kolo_test_types::Bf16;
using kolo_test_types::Bool;
using kolo_test_types::Half;
using kolo_test_types::Plain;

// Every dtype NCCL reduces.
using NcclDtypes = ::testing::Types<Plain<uint8_t, KOLO_UINT8>, Plain<int8_t, KOLO_INT8>,
                                    Plain<int32_t, KOLO_INT32>, Plain<int64_t, KOLO_INT64>, Half,
                                    Bf16, Plain<float, KOLO_FLOAT32>, Plain<double, KOLO_FLOAT64>,
                                    Bool>;
using FloatDtypes = ::testing::Types<Half, Bf16, Plain<float, KOLO_FLOAT32>,
                                     Plain<double, KOLO_FLOAT64>>;

// The one-rank-to-all-ranks reduction of per-rank values, as kolo.h defines it:
// bool SUM/MAX = or, MIN/PRODUCT = and; integer AVERAGE truncates toward zero.
double reduce_expected(const std::vector<double>& per_rank, kolo_op_t op, bool is_bool,
                       bool is_floating);

const char* op_label(kolo_op_t op);

// A test on this rank's GPU: device_ is local_rank modulo the visible devices (what
// kolo picks for index -1) and is the current device.
class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override;

  // The tensor's device for kolo: this rank's GPU, produced on `stream`.
  kolo_device_t cuda(void* stream = nullptr) const {
    kolo_device_t d;
    d.kind = KOLO_DEVICE_CUDA;
    d.index = device_;
    d.stream = stream;
    return d;
  }
  // A tensor name unique to this test (and `suffix`).
  std::string name(const std::string& suffix) const;

  // Waits (with a generous bound) and releases; returns the handle's status and
  // puts its message in *message.
  static kolo_status_t finish(kolo_handle_t h, std::string* message = nullptr);

  int rank_ = 0;
  int size_ = 1;
  int device_ = 0;
};

// Compares `count` elements of dtype V at `got` (host copy) with expected(i); reports
// the number of differences and the first one.
template <typename V, typename F>
::testing::AssertionResult elements_equal(const std::vector<uint8_t>& got, int64_t count,
                                          F expected) {
  using S = typename V::Storage;
  if (got.size() < static_cast<size_t>(count) * sizeof(S))
    return ::testing::AssertionFailure() << "short buffer: " << got.size() << " bytes";
  const S* p = reinterpret_cast<const S*>(got.data());
  int64_t wrong = 0, first = -1;
  for (int64_t i = 0; i < count; ++i) {
    if (V::to(p[i]) != expected(i)) {
      if (first < 0) first = i;
      ++wrong;
    }
  }
  if (wrong == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << wrong << " of " << count << " elements wrong; first at " << first << ": got "
         << V::to(p[first]) << ", expected " << expected(first);
}

// Host bytes of `count` elements of dtype V with values value(i).
template <typename V, typename F>
std::vector<uint8_t> make_bytes(int64_t count, F value) {
  using S = typename V::Storage;
  std::vector<uint8_t> bytes(static_cast<size_t>(count) * sizeof(S));
  S* p = reinterpret_cast<S*>(bytes.data());
  for (int64_t i = 0; i < count; ++i) p[i] = V::from(value(i));
  return bytes;
}

}  // namespace kolo_gpu_test
