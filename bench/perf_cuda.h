// CUDA and NCCL for kolo-allreduce-perf -t nccl (device buffers), behind one small
// interface so that the rest of the benchmark includes no CUDA or NCCL header and
// has no #if: perf_cuda.cc implements it in builds with NCCL (KOLO_HAVE_NCCL), and
// perf_cuda_stub.cc, which only refuses, in the others.
//
// Everything here is called from the benchmark's main thread. After a successful
// open_cuda_device(), a CUDA or NCCL error is not something the benchmark can go on
// from: the call prints "kolo-allreduce-perf: <call>: <error>" and aborts the job
// (abort_job), as the MPI reference does.
#pragma once

#include <kolo/kolo.h>
#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "common/dtype.h"

namespace kolo::bench {

// Device memory from cudaMalloc, freed (cudaFree) when its owner goes. Move-only.
class DeviceMemory {
 public:
  DeviceMemory() = default;
  DeviceMemory(char* data, size_t bytes) : data_(data), bytes_(bytes) {}
  ~DeviceMemory();
  DeviceMemory(DeviceMemory&& other) noexcept : data_(other.data_), bytes_(other.bytes_) {
    other.data_ = nullptr;
    other.bytes_ = 0;
  }
  DeviceMemory& operator=(DeviceMemory&& other) noexcept;
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;

  char* data() const { return data_; }
  size_t bytes() const { return bytes_; }

 private:
  char* data_ = nullptr;
  size_t bytes_ = 0;
};

// ncclAllReduce called directly, on its own communicator (ncclCommInitRank over the
// benchmark's MPI communicator: rank 0's ncclGetUniqueId travels by MPI_Bcast) and
// its own stream. Created collectively (every rank, same order); destroyed
// collectively too (ncclCommDestroy).
//
// The (dtype, op) map follows kolo's semantics where NCCL has them: bool is uint8
// with max (sum, max: logical or) or min (min, prod: logical and); avg is ncclAvg,
// which for floating types scales each input by 1/n before summing where kolo sums
// first, so its last bit may differ from kolo's when 1/n is not a power of two (the
// benchmark reports reference mismatches apart from kolo's).
class NcclReference {
 public:
  virtual ~NcclReference() = default;

  // Queues out = allreduce(in) (count elements; in may equal out) on the reference
  // stream. Returns at once.
  virtual void enqueue_allreduce(const void* in, void* out, int64_t count) = 0;
  // Queues a device-to-device cudaMemcpyAsync on the reference stream.
  virtual void enqueue_copy(void* dst, const void* src, size_t bytes) = 0;
  // cudaStreamSynchronize of the reference stream.
  virtual void synchronize() = 0;

  // enqueue_allreduce + synchronize: one timed reference iteration.
  void allreduce(const void* in, void* out, int64_t count) {
    enqueue_allreduce(in, out, count);
    synchronize();
  }
};

// The GPU this rank uses and the producer stream the benchmark hands to kolo (the
// stream of kolo_device_t: kolo's work waits for what was queued on it).
class CudaDevice {
 public:
  virtual ~CudaDevice() = default;

  virtual int ordinal() const = 0;
  virtual void* stream() const = 0;  // a cudaStream_t
  kolo_device_t kolo_device() const { return kolo_device_t{KOLO_DEVICE_CUDA, ordinal(), stream()}; }

  // cudaMalloc of `bytes`, every byte set to zero (so the memory is committed before
  // any timed loop).
  virtual DeviceMemory allocate(size_t bytes) = 0;
  // Synchronous copies host -> device and device -> host, and a memset of device
  // memory; each returns when the device is done.
  virtual void upload(void* device, const void* host, size_t bytes) = 0;
  virtual void download(void* host, const void* device, size_t bytes) = 0;
  virtual void fill(void* device, int byte, size_t bytes) = 0;

  // A new NCCL reference over `comm` for (dtype, op); collective. Aborts the job for
  // a dtype NCCL lacks (uint16, int16: options refuse them first).
  virtual std::unique_ptr<NcclReference> nccl_reference(MPI_Comm comm, DataType dtype,
                                                        ReduceOp op) = 0;

  // "cuda:0 (NVIDIA H100 80GB HBM3), NCCL 2.28.9": for the header.
  virtual std::string describe() const = 0;
};

// Opens this rank's GPU: ordinal local_rank % visible devices (the local rank from
// MPI_Comm_split_type(SHARED) of comm), and creates the producer stream. Collective
// over comm. Returns null and sets *reason to one line when this build has no NCCL
// transport or no CUDA device is visible (never hangs, never aborts).
std::unique_ptr<CudaDevice> open_cuda_device(MPI_Comm comm, std::string* reason);

}  // namespace kolo::bench
