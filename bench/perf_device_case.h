// The size sweep's allreduce on device buffers (-t nccl), with ncclAllReduce on the
// same buffers as its reference (-r nccl).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <string>

#include "bench/perf_buffer.h"
#include "bench/perf_collective.h"
#include "bench/perf_cuda.h"
#include "bench/perf_options.h"

namespace kolo::bench {

// Allreduce of device memory: the input is written once from host data (Note [Exact
// inputs]) for the largest size and every size uses prefixes, as on the host. kolo is
// handed kolo_device_t{CUDA, ordinal, producer stream}; nothing is queued on the
// producer stream while an operation is timed, so the time is submit -> kolo_wait
// (which returns once the device work is done). The reference is ncclAllReduce on
// the same input into its own output, on its own communicator and stream, followed
// by cudaStreamSynchronize. With -c 1 the output is set to all ones bits before the
// timer starts and copied back to the host after it stops, then compared bit for bit
// with the expected result. Same calling rules as SweepCase; `device` must outlive
// the case.
class DeviceAllreduceCase final : public SweepCase {
 public:
  DeviceAllreduceCase(MPI_Comm comm, const PerfOptions& options, int64_t max_bytes,
                      CudaDevice* device);
  DeviceAllreduceCase(const DeviceAllreduceCase&) = delete;
  DeviceAllreduceCase& operator=(const DeviceAllreduceCase&) = delete;

  CollectiveShape shape_of(int64_t bytes) const override;
  void set_shape(const CollectiveShape& shape) override { shape_ = shape; }
  double run_kolo(const std::string& name, int64_t* wrong) override;
  double run_reference(int64_t* wrong) override;

 private:
  size_t shape_bytes() const { return static_cast<size_t>(shape_.count) * elem_; }
  void poison_output(char* output) const;
  int64_t count_wrong_output(const char* output);  // downloads into result_

  MPI_Comm comm_;
  const PerfOptions& options_;
  CudaDevice* device_;
  int world_size_ = 1;
  size_t elem_ = 0;
  CollectiveShape shape_;
  std::unique_ptr<NcclReference> reference_;  // -r nccl only
  DeviceMemory input_, output_, ref_output_;
  Buffer expected_, result_;  // host; -c 1 only
};

}  // namespace kolo::bench
