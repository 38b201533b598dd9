// perf_cuda.h for builds without NCCL: device buffers are refused with the reason
// the build gives; no CUDA header, no CUDA library.
#include <utility>

#include "bench/perf_cuda.h"
#include "kolo_build_config.h"

namespace kolo::bench {

// No DeviceMemory is ever made with data here: open_cuda_device gives no device.
DeviceMemory::~DeviceMemory() = default;

DeviceMemory& DeviceMemory::operator=(DeviceMemory&& other) noexcept {
  std::swap(data_, other.data_);
  std::swap(bytes_, other.bytes_);
  return *this;
}

std::unique_ptr<CudaDevice> open_cuda_device(MPI_Comm comm, std::string* reason) {
  *reason = std::string("this build has no NCCL transport (") + KOLO_NCCL_REASON + ")";
  return nullptr;
}

}  // namespace kolo::bench
