#include "bench/perf_device_case.h"

#include "bench/perf_data.h"
#include "bench/perf_kolo.h"
#include "bench/perf_report.h"

namespace kolo::bench {

DeviceAllreduceCase::DeviceAllreduceCase(MPI_Comm comm, const PerfOptions& options,
                                         int64_t max_bytes, CudaDevice* device)
    : comm_(comm), options_(options), device_(device), elem_(dtype_size(options.dtype)) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &world_size_);
  const CollectiveShape most = shape_of(max_bytes);
  const size_t bytes = static_cast<size_t>(most.count) * elem_;
  {
    Buffer host(bytes);
    fill_input(host.data(), most.count, options.dtype, options.op, rank);
    input_ = device->allocate(bytes);
    device->upload(input_.data(), host.data(), bytes);
  }
  output_ = device->allocate(bytes);
  if (options.reference == Reference::kNccl) {
    ref_output_ = device->allocate(bytes);
    reference_ = device->nccl_reference(comm, options.dtype, options.op);
  }
  if (options.check) {
    expected_ = Buffer(bytes);
    result_ = Buffer(bytes);
    fill_expected(expected_.data(), most.count, options.dtype, options.op, world_size_);
  }
}

CollectiveShape DeviceAllreduceCase::shape_of(int64_t bytes) const {
  return collective_shape(Collective::kAllreduce, bytes, elem_, world_size_);
}

void DeviceAllreduceCase::poison_output(char* output) const {
  if (options_.check) device_->fill(output, 0xff, shape_bytes());
}

int64_t DeviceAllreduceCase::count_wrong_output(const char* output) {
  device_->download(result_.data(), output, shape_bytes());
  return count_wrong(result_.data(), expected_.data(), shape_.count, options_.dtype);
}

double DeviceAllreduceCase::run_kolo(const std::string& name, int64_t* wrong) {
  poison_output(output_.data());
  const double start = now_seconds();
  kolo_allreduce(comm_, name, input_.data(), output_.data(), shape_.count, options_.dtype,
                 options_.op, device_->kolo_device());
  const double seconds = now_seconds() - start;
  if (options_.check) *wrong += count_wrong_output(output_.data());
  return seconds;
}

double DeviceAllreduceCase::run_reference(int64_t* wrong) {
  poison_output(ref_output_.data());
  const double start = now_seconds();
  reference_->allreduce(input_.data(), ref_output_.data(), shape_.count);
  const double seconds = now_seconds() - start;
  if (options_.check) *wrong += count_wrong_output(ref_output_.data());
  return seconds;
}

}  // namespace kolo::bench
