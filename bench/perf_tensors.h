// --tensors N: kolo-allreduce-perf's size sweep with N tensors per operation, the
// case fusion is for (many small gradients, many small allgathers per step).
//
// One timed operation is N tensors of the row's size, all submitted
// (kolo_<collective>_async under N names), then all waited for: what negotiation
// finds ready together is fused (allreduce into buckets; allgather and broadcast
// too, Note [Fused allgather and broadcast] in src/core/executor_gather.h). The MPI
// reference (-r mpi) is what a user without kolo writes: N blocking calls, one per
// tensor, on the same buffers. The size column is one tensor's; algbw and busbw
// count all N tensors (N * size / time). Allreduce, allgather and broadcast (root
// 0, in place); data and checks as CollectiveCase's (perf_collective.h).
#pragma once

#include <kolo/kolo.h>
#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

#include "bench/perf_buffer.h"
#include "bench/perf_collective.h"
#include "bench/perf_mpi.h"
#include "bench/perf_options.h"

namespace kolo::bench {

class TensorsCase final : public SweepCase {
 public:
  TensorsCase(MPI_Comm comm, const PerfOptions& options, int64_t max_bytes);
  TensorsCase(const TensorsCase&) = delete;
  TensorsCase& operator=(const TensorsCase&) = delete;

  CollectiveShape shape_of(int64_t bytes) const override;
  void set_shape(const CollectiveShape& shape) override;
  double run_kolo(const std::string& name, int64_t* wrong) override;
  double run_reference(int64_t* wrong) override;

 private:
  void prepare(std::vector<Buffer>& outputs) const;  // poison; the broadcast root's data
  int64_t count_wrong_in(const char* output, int64_t bytes) const;

  static constexpr int kRoot = 0;

  MPI_Comm comm_;
  const PerfOptions& options_;
  int rank_ = 0, world_size_ = 1;
  size_t elem_ = 0;
  CollectiveShape shape_;
  MpiReference reference_;
  Buffer input_, expected_;
  std::vector<Buffer> outputs_, ref_outputs_;  // one per tensor (broadcast: in place)
  std::vector<kolo_handle_t> handles_;
};

}  // namespace kolo::bench
