// perf_cuda.h for builds with NCCL: the CUDA runtime and NCCL called directly (the
// benchmark is a program; libkolo keeps them behind its transport).
#include "bench/perf_cuda.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <utility>

#include "bench/perf_mpi.h"

namespace kolo::bench {
namespace {

// Every CUDA call after open_cuda_device goes through this: an error ends the job.
void check_cuda(MPI_Comm comm, cudaError_t rc, const char* what) {
  if (rc != cudaSuccess) abort_job(comm, what, cudaGetErrorString(rc));
}

void check_nccl(MPI_Comm comm, ncclResult_t rc, const char* what) {
  if (rc != ncclSuccess) abort_job(comm, what, ncclGetErrorString(rc));
}

ncclDataType_t nccl_type(MPI_Comm comm, DataType dtype) {
  switch (dtype) {
    case DataType::kUint8:
    case DataType::kBool:
      return ncclUint8;
    case DataType::kInt8:
      return ncclInt8;
    case DataType::kInt32:
      return ncclInt32;
    case DataType::kInt64:
      return ncclInt64;
    case DataType::kFloat16:
      return ncclFloat16;
    case DataType::kBfloat16:
      return ncclBfloat16;
    case DataType::kFloat32:
      return ncclFloat32;
    case DataType::kFloat64:
      return ncclFloat64;
    case DataType::kUint16:
    case DataType::kInt16:
      break;
  }
  abort_job(comm, "ncclAllReduce", ("NCCL has no " + dtype_name(dtype) + " type").c_str());
}

// See the class comment of NcclReference for bool and avg.
ncclRedOp_t nccl_op(DataType dtype, ReduceOp op) {
  if (dtype == DataType::kBool) {
    return (op == ReduceOp::kMin || op == ReduceOp::kProduct) ? ncclMin : ncclMax;
  }
  switch (op) {
    case ReduceOp::kSum:
      return ncclSum;
    case ReduceOp::kAverage:
      return ncclAvg;
    case ReduceOp::kMin:
      return ncclMin;
    case ReduceOp::kMax:
      return ncclMax;
    case ReduceOp::kProduct:
      return ncclProd;
    case ReduceOp::kAdasum:  // -o does not offer it
      break;
  }
  return ncclSum;
}

class NcclReferenceImpl final : public NcclReference {
 public:
  NcclReferenceImpl(MPI_Comm comm, int ordinal, DataType dtype, ReduceOp op)
      : comm_(comm), type_(nccl_type(comm, dtype)), op_(nccl_op(dtype, op)) {
    int rank = 0, size = 1;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    ncclUniqueId id{};
    if (rank == 0) check_nccl(comm, ncclGetUniqueId(&id), "ncclGetUniqueId");
    MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, comm);
    check_cuda(comm, cudaSetDevice(ordinal), "cudaSetDevice");
    check_cuda(comm, cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking),
               "cudaStreamCreateWithFlags");
    check_nccl(comm, ncclCommInitRank(&nccl_, size, id, rank), "ncclCommInitRank");
  }
  ~NcclReferenceImpl() override {
    if (nccl_ != nullptr) ncclCommDestroy(nccl_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  void enqueue_allreduce(const void* in, void* out, int64_t count) override {
    check_nccl(comm_,
               ncclAllReduce(in, out, static_cast<size_t>(count), type_, op_, nccl_, stream_),
               "ncclAllReduce");
  }
  void enqueue_copy(void* dst, const void* src, size_t bytes) override {
    check_cuda(comm_, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_),
               "cudaMemcpyAsync");
  }
  void synchronize() override {
    check_cuda(comm_, cudaStreamSynchronize(stream_), "cudaStreamSynchronize(reference)");
  }

 private:
  MPI_Comm comm_;
  ncclDataType_t type_;
  ncclRedOp_t op_;
  cudaStream_t stream_ = nullptr;
  ncclComm_t nccl_ = nullptr;
};

class CudaDeviceImpl final : public CudaDevice {
 public:
  CudaDeviceImpl(MPI_Comm comm, int ordinal, cudaStream_t stream)
      : comm_(comm), ordinal_(ordinal), stream_(stream) {}
  ~CudaDeviceImpl() override { cudaStreamDestroy(stream_); }

  int ordinal() const override { return ordinal_; }
  void* stream() const override { return stream_; }

  DeviceMemory allocate(size_t bytes) override {
    if (bytes == 0) return DeviceMemory();
    void* p = nullptr;
    check_cuda(comm_, cudaMalloc(&p, bytes), "cudaMalloc");
    DeviceMemory memory(static_cast<char*>(p), bytes);
    fill(p, 0, bytes);
    return memory;
  }
  void upload(void* device, const void* host, size_t bytes) override {
    check_cuda(comm_, cudaMemcpy(device, host, bytes, cudaMemcpyHostToDevice), "cudaMemcpy(H2D)");
    // A pageable copy may return before its DMA lands, and the non-blocking
    // streams that read the buffer next do not wait for the legacy stream.
    check_cuda(comm_, cudaDeviceSynchronize(), "cudaDeviceSynchronize(upload)");
  }
  void download(void* host, const void* device, size_t bytes) override {
    check_cuda(comm_, cudaMemcpy(host, device, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy(D2H)");
  }
  void fill(void* device, int byte, size_t bytes) override {
    check_cuda(comm_, cudaMemsetAsync(device, byte, bytes, stream_), "cudaMemsetAsync");
    check_cuda(comm_, cudaStreamSynchronize(stream_), "cudaStreamSynchronize(producer)");
  }

  std::unique_ptr<NcclReference> nccl_reference(MPI_Comm comm, DataType dtype,
                                                ReduceOp op) override {
    return std::make_unique<NcclReferenceImpl>(comm, ordinal_, dtype, op);
  }

  std::string describe() const override {
    cudaDeviceProp prop{};
    std::string name = cudaGetDeviceProperties(&prop, ordinal_) == cudaSuccess ? prop.name : "?";
    int version = 0;
    ncclGetVersion(&version);
    // NCCL >= 2.9 encodes major*10000 + minor*100 + patch.
    return "cuda:" + std::to_string(ordinal_) + " (" + name + "), NCCL " +
           std::to_string(version / 10000) + "." + std::to_string(version / 100 % 100) + "." +
           std::to_string(version % 100);
  }

 private:
  MPI_Comm comm_;
  int ordinal_;
  cudaStream_t stream_;
};

int local_rank(MPI_Comm comm) {
  MPI_Comm local;
  MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local);
  int rank = 0;
  MPI_Comm_rank(local, &rank);
  MPI_Comm_free(&local);
  return rank;
}

}  // namespace

DeviceMemory::~DeviceMemory() {
  if (data_ != nullptr) cudaFree(data_);
}

DeviceMemory& DeviceMemory::operator=(DeviceMemory&& other) noexcept {
  std::swap(data_, other.data_);
  std::swap(bytes_, other.bytes_);
  return *this;
}

std::unique_ptr<CudaDevice> open_cuda_device(MPI_Comm comm, std::string* reason) {
  const int local = local_rank(comm);
  int count = 0;
  cudaError_t rc = cudaGetDeviceCount(&count);
  if (rc != cudaSuccess || count == 0) {
    *reason = std::string("no CUDA device visible (cudaGetDeviceCount: ") +
              (rc != cudaSuccess ? cudaGetErrorString(rc) : "0 devices") + ")";
    return nullptr;
  }
  const int ordinal = local % count;
  cudaStream_t stream = nullptr;
  rc = cudaSetDevice(ordinal);
  if (rc == cudaSuccess) rc = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  if (rc != cudaSuccess) {
    *reason = "cannot use cuda:" + std::to_string(ordinal) + " (" + cudaGetErrorString(rc) + ")";
    return nullptr;
  }
  return std::make_unique<CudaDeviceImpl>(comm, ordinal, stream);
}

}  // namespace kolo::bench
