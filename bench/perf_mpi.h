// The MPI side of kolo-allreduce-perf: the MPI_Allreduce reference and the
// max-over-ranks reduction of timings.
//
// Everything here runs on the benchmark's own duplicate of MPI_COMM_WORLD, from the
// main thread, while kolo's coordinator thread uses its own communicator; MPI must
// have been initialised with MPI_THREAD_MULTIPLE.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <vector>

#include "common/dtype.h"

namespace kolo::bench {

// MPI's collectives with kolo's semantics for one (dtype, op), so its results equal
// kolo's bit for bit:
// - float16 / bfloat16 (no MPI type) travel as MPI_UINT16_T with a user-defined op
//   that reduces with kolo's own CPU kernel;
// - bool is MPI_C_BOOL with MPI_LOR (sum, max) or MPI_LAND (min, prod);
// - AVERAGE is MPI_SUM followed by a pass that scales by 1/n (floating types) or
//   divides (integers), as a user without kolo would have to do; that pass is part
//   of the timed reference.
class MpiReference {
 public:
  MpiReference(MPI_Comm comm, DataType dtype, ReduceOp op);
  ~MpiReference();
  MpiReference(const MpiReference&) = delete;
  MpiReference& operator=(const MpiReference&) = delete;

  // out = allreduce(in); in may equal out (MPI_IN_PLACE). Blocking. Aborts the job
  // on an MPI error (the benchmark cannot continue without its reference).
  void allreduce(const void* in, void* out, int64_t count) const;

  // The other collectives' MPI calls, with the counts nccl-tests passes: per rank
  // (MPI_Allgather, MPI_Reduce_scatter_block + the avg pass on the shard), per peer
  // (MPI_Alltoall), the whole buffer (MPI_Bcast, in place from root). Blocking;
  // abort the job on an MPI error.
  void allgather(const void* in, void* out, int64_t count_per_rank) const;
  void broadcast(void* buffer, int64_t count, int root) const;
  void alltoall(const void* in, void* out, int64_t count_per_peer) const;
  void reduce_scatter(const void* in, void* out, int64_t count_per_rank) const;

 private:
  int int_count(int64_t count, const char* what) const;  // aborts above INT_MAX
  void finish_average(void* out, int64_t count) const;   // the avg pass, if op is avg

  MPI_Comm comm_;
  DataType dtype_;
  ReduceOp kolo_op_;
  MPI_Datatype mpi_type_ = MPI_DATATYPE_NULL;
  MPI_Op mpi_op_ = MPI_OP_NULL;
  bool user_op_ = false;
  int world_size_ = 1;
};

// Element-wise maximum of `local` over the ranks of comm (every rank passes a vector
// of the same length). Called after a timed loop, never inside it.
std::vector<double> max_over_ranks(MPI_Comm comm, const std::vector<double>& local);

// Sum of `local` over the ranks of comm.
int64_t sum_over_ranks(MPI_Comm comm, int64_t local);

// Prints "kolo-allreduce-perf: <what>: <message>" on stderr and aborts the job.
[[noreturn]] void abort_job(MPI_Comm comm, const char* what, const char* message);

}  // namespace kolo::bench
