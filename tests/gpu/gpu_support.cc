#include "gpu_support.h"

#include <algorithm>
#include <utility>

namespace kolo_gpu_test {

std::string why_not_runnable() {
  const char* reason = nullptr;
  if (!kolo_transport_built("nccl", &reason))
    return std::string("libkolo has no NCCL transport: ") + (reason ? reason : "");
  int devices = 0;
  cudaError_t err = cudaGetDeviceCount(&devices);
  if (err != cudaSuccess) {
    cudaGetLastError();  // clear it, so later CUDA calls do not report it again
    return std::string("no CUDA device visible: cudaGetDeviceCount failed with ") +
           cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")";
  }
  if (devices == 0) return "no CUDA device visible: cudaGetDeviceCount returned 0";
  const int ranks = kolo_local_size();
  if (ranks > devices)
    return "needs one GPU per rank (NCCL refuses two ranks on one device): " +
           std::to_string(ranks) + " ranks on this node, " + std::to_string(devices) +
           " device(s) visible";
  return "";
}

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) {
  cudaError_t err = cudaMalloc(&ptr_, std::max<size_t>(bytes, 1));
  if (err != cudaSuccess) {
    ADD_FAILURE() << "cudaMalloc(" << bytes << "): " << cudaGetErrorName(err);
    ptr_ = nullptr;
  }
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_) cudaFree(ptr_);
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : ptr_(std::exchange(other.ptr_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (ptr_) cudaFree(ptr_);
    ptr_ = std::exchange(other.ptr_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void DeviceBuffer::upload(const void* host, size_t bytes) {
  ASSERT_LE(bytes, bytes_);
  GPU_CHECK(cudaMemcpy(ptr_, host, bytes, cudaMemcpyHostToDevice));
  // A pageable copy may return before its DMA lands, and non-blocking streams do
  // not wait for the legacy stream it ran on.
  GPU_CHECK(cudaDeviceSynchronize());
}

void DeviceBuffer::download(void* host, size_t bytes) const {
  ASSERT_LE(bytes, bytes_);
  GPU_CHECK(cudaMemcpy(host, ptr_, bytes, cudaMemcpyDeviceToHost));
}

void DeviceBuffer::fill_bytes(int value) {
  GPU_CHECK(cudaMemset(ptr_, value, std::max<size_t>(bytes_, 1)));
  GPU_CHECK(cudaDeviceSynchronize());
}

std::vector<uint8_t> download_bytes(const void* src, size_t bytes) {
  std::vector<uint8_t> out(bytes);
  if (bytes == 0) return out;
  cudaError_t err = cudaMemcpy(out.data(), src, bytes, cudaMemcpyDeviceToHost);
  if (err != cudaSuccess) ADD_FAILURE() << "cudaMemcpy to host: " << cudaGetErrorName(err);
  return out;
}

double reduce_expected(const std::vector<double>& v, kolo_op_t op, bool is_bool,
                       bool is_floating) {
  double r = v[0];
  for (size_t i = 1; i < v.size(); ++i) {
    switch (op) {
      case KOLO_OP_SUM:
      case KOLO_OP_AVERAGE: r = is_bool ? (r != 0 || v[i] != 0) : r + v[i]; break;
      case KOLO_OP_MIN: r = std::min(r, v[i]); break;
      case KOLO_OP_MAX: r = std::max(r, v[i]); break;
      case KOLO_OP_PRODUCT: r = is_bool ? (r != 0 && v[i] != 0) : r * v[i]; break;
    }
  }
  if (op == KOLO_OP_AVERAGE) {
    r /= static_cast<double>(v.size());
    if (!is_floating) r = std::trunc(r);
  }
  return r;
}

const char* op_label(kolo_op_t op) {
  switch (op) {
    case KOLO_OP_SUM: return "sum";
    case KOLO_OP_AVERAGE: return "average";
    case KOLO_OP_MIN: return "min";
    case KOLO_OP_MAX: return "max";
    case KOLO_OP_PRODUCT: return "product";
  }
  return "?";
}

void GpuTest::SetUp() {
  ASSERT_EQ(kolo_is_initialized(), 1) << "gpu_main initialises kolo before the tests";
  const std::string why = why_not_runnable();
  if (!why.empty()) GTEST_SKIP() << why;
  rank_ = kolo_rank();
  size_ = kolo_size();
  int devices = 0;
  GPU_CHECK(cudaGetDeviceCount(&devices));
  device_ = kolo_local_rank() % devices;
  GPU_CHECK(cudaSetDevice(device_));
}

std::string GpuTest::name(const std::string& suffix) const {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  return std::string(info->test_suite_name()) + "." + info->name() + "." + suffix;
}

kolo_status_t GpuTest::finish(kolo_handle_t h, std::string* message) {
  kolo_status_t s = kolo_wait(h, 120.0);
  if (message) *message = kolo_handle_message(h);
  if (s != KOLO_ERR_TIMEOUT) kolo_handle_release(h);  // a timed-out handle's buffers may still be read
  return s;
}

}  // namespace kolo_gpu_test
