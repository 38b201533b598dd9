// One collective of kolo-allreduce-perf's size sweep: its sizes and bandwidth factor
// in nccl-tests' conventions, its persistent buffers, exact expected results, the kolo
// call and the matching MPI call.
//
// Note [Sizes and bandwidths per collective]
// Every collective is reported as nccl-tests reports it (src/<collective>.cu:
// GetCollByteCount and GetBw; src/common.cu: setupArgs and the row printout;
// doc/PERFORMANCE.md, "Summary", for the bus bandwidth factors). -b/-e give S bytes;
// with c = S / sizeof(dtype) elements and n ranks:
//
//   collective     count column (paramcount)    input      output     busbw factor
//   allreduce      c                            c          c          2(n-1)/n
//   allgather      c/n  (sent by each rank)     c/n        n*(c/n)    (n-1)/n
//   broadcast      c    (root 0)                c          c          1
//   alltoall       c/n  (sent to each peer)     n*(c/n)    n*(c/n)    (n-1)/n
//   reducescatter  c/n  (each rank's shard)     n*(c/n)    c/n        (n-1)/n
//
// The size column is the larger of a rank's input and output in bytes (c rounded down
// to a multiple of n), algbw = size / time, busbw = algbw * factor. One difference:
// a per-rank count is at least 1 element, where nccl-tests would time an empty call.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>

#include "bench/perf_buffer.h"
#include "bench/perf_mpi.h"
#include "bench/perf_options.h"

namespace kolo::bench {

struct CollectiveShape {
  int64_t count = 0;   // nccl-tests' count column (see the Note)
  int64_t input = 0;   // elements of one rank's input
  int64_t output = 0;  // elements of one rank's output
  int64_t size() const { return input > output ? input : output; }  // the size column
};

// The shape of `collective` for -b/-e value `bytes` over n ranks (see the Note).
CollectiveShape collective_shape(Collective collective, int64_t bytes, size_t elem, int n);

// nccl-tests' bus bandwidth factor for `collective` over n ranks (see the Note).
double bus_factor(Collective collective, int n);

// "2(n-1)/n", "(n-1)/n" or "1": the factor as the header prints it.
const char* bus_factor_text(Collective collective);

// What the size sweep (perf_sweep.cc) times, size after size: one operation through
// kolo, and one through the reference (-r), on buffers the case owns. Called from the
// main thread, every call in the same order on every rank.
class SweepCase {
 public:
  virtual ~SweepCase() = default;

  virtual CollectiveShape shape_of(int64_t bytes) const = 0;

  // Selects the size that the next run_* calls use and computes its expected result.
  // `shape` must come from shape_of(b) with b <= the case's max_bytes.
  virtual void set_shape(const CollectiveShape& shape) = 0;

  // One operation through kolo (submit + wait, tensor `name`) or through the
  // reference; returns the seconds it took on this rank. With -c 1 the output is
  // poisoned before the timer starts and compared with the expected result after it
  // stops; elements that differ are added to *wrong.
  virtual double run_kolo(const std::string& name, int64_t* wrong) = 0;
  virtual double run_reference(int64_t* wrong) = 0;
};

// The data side of a sweep over one collective on host buffers, on the benchmark's
// communicator, from the main thread, every call in the same order on every rank.
//
// Buffers are allocated and written once, for the largest size (on this VM the first
// touch of a page costs more than the collective), and every size uses prefixes.
// Inputs follow Note [Exact inputs] (allreduce, reducescatter) or Note [Exact sequences
// for data movement] (allgather, broadcast, alltoall). Broadcast is in place from root
// 0 for kolo and MPI alike (MPI_Bcast has no other form). Allgather and alltoall
// outputs are allocated by kolo inside each timed operation (a std::vector in the
// handle, as users get them); the handle is released after the timer stops and the
// check, so its free is not timed.
class CollectiveCase final : public SweepCase {
 public:
  CollectiveCase(MPI_Comm comm, const PerfOptions& options, int64_t max_bytes);
  CollectiveCase(const CollectiveCase&) = delete;
  CollectiveCase& operator=(const CollectiveCase&) = delete;

  CollectiveShape shape_of(int64_t bytes) const override;
  void set_shape(const CollectiveShape& shape) override;
  // The reference is the matching MPI call (-r mpi).
  double run_kolo(const std::string& name, int64_t* wrong) override;
  double run_reference(int64_t* wrong) override;

 private:
  void fill_expected_for_shape();
  void prepare_output(char* output) const;  // poison; broadcast's root: its data
  int64_t count_wrong_output(const char* output, int64_t bytes) const;

  static constexpr int kRoot = 0;

  MPI_Comm comm_;
  const PerfOptions& options_;
  int rank_ = 0, world_size_ = 1;
  size_t elem_ = 0;
  CollectiveShape shape_;
  MpiReference reference_;
  Buffer input_, output_, ref_output_, expected_;
};

}  // namespace kolo::bench
