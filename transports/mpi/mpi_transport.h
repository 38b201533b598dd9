// The "mpi" transport: MPI_Iallreduce on the bucket, the reference the other
// transports are measured against.
//
// Contract (see transport/transport.h): called by the coordinator thread only, for
// buckets in the same order on every rank. CPU memory only; ops SUM, MIN, MAX,
// PRODUCT (the coordinator turns AVERAGE into SUM and applies scale factors
// itself). The returned Work finishes with the polite wait (mpi_wait.h).
//
// Types and ops, and why (measured at 2 and 4 ranks on this 2-core machine with
// MPICH 4.0.2: native MPI_SUM 120 µs vs a user-defined sum 172 µs for 1 MiB of
// int32 at 2 ranks, 389 vs 636 µs at 4; equal at 8 B):
// - integers, float32, float64: MPI's predefined types and ops. Integer SUM and
//   PRODUCT wrap in two's complement as kolo promises (MPICH computes them with
//   plain C arithmetic; mpi_transport_test checks the wrap exactly).
// - float16, bfloat16: a 2-byte contiguous type per format, with user ops that
//   call kolo::reduce::reduce, so they round exactly like kolo's own kernels.
// - bool (one byte, 0 or 1): MPI_UINT8_T with MPI_LOR (SUM, MAX) and MPI_LAND
//   (MIN, PRODUCT) — logical, as kolo.h documents.
// Counts above INT_MAX elements become several MPI_Iallreduce calls on
// consecutive slices, all posted at once and waited together.
//
// The other collectives (mpi_collectives.cc): allgather -> MPI_Iallgatherv,
// broadcast -> MPI_Ibcast, alltoall -> MPI_Ialltoallv, reducescatter ->
// MPI_Ireduce_scatter, with the same types and ops; see Note [Counts above
// INT_MAX] there for the limits.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "transport/transport.h"
#include "transports/mpi/mpi_comm.h"

namespace kolo::mpi {

class MpiTransport : public transport::Transport {
 public:
  static constexpr int64_t kMaxCountPerCall = INT32_MAX;

  // Creates the half-precision datatypes and ops once. `max_count_per_call`
  // exists so that tests can exercise the split without 2^31 elements.
  static Status create(SharedComms comms, std::unique_ptr<MpiTransport>* out,
                       int64_t max_count_per_call = kMaxCountPerCall);
  ~MpiTransport() override;  // frees the datatypes and ops

  const char* name() const override { return "mpi"; }
  transport::Capabilities capabilities() const override {
    transport::Capabilities c;
    c.collectives = transport::kAllCollectives;
    c.host = true;
    return c;
  }
  Status supports(const transport::Bucket& bucket) const override;
  std::unique_ptr<transport::Work> allreduce(const transport::Bucket& bucket) override;

  // Defined in mpi_collectives.cc.
  Status supports_collective(Collective op,
                             const transport::CollectiveView& view) const override;
  std::unique_ptr<transport::Work> collective(Collective op,
                                              const transport::CollectiveView& view) override;

 private:
  static constexpr int kNumOps = 4;  // SUM, MIN, MAX, PRODUCT

  MpiTransport(SharedComms comms, int64_t max_count_per_call);
  Status create_half_types();
  // The MPI datatype and op for a supported bucket.
  void mpi_type_and_op(DataType dtype, ReduceOp op, MPI_Datatype* type, MPI_Op* mpi_op) const;
  // MPI_Iallreduce of one contiguous buffer, in calls of at most max_count_per_call_.
  std::unique_ptr<transport::Work> start_allreduce(const void* in, void* out, int64_t count,
                                                   DataType dtype, ReduceOp op);
  // A collective's MPI calls (mpi_collectives.cc); factors are the caller's.
  std::unique_ptr<transport::Work> start(Collective op,
                                         const transport::CollectiveView& view, int rank);

  SharedComms comms_;
  MPI_Comm comm_;
  int64_t max_count_per_call_;
  MPI_Datatype float16_type_ = MPI_DATATYPE_NULL;
  MPI_Datatype bfloat16_type_ = MPI_DATATYPE_NULL;
  MPI_Op float16_ops_[kNumOps] = {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL};
  MPI_Op bfloat16_ops_[kNumOps] = {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL};
  std::vector<char> scratch_;  // a prescaled reducescatter input; grow-only
};

}  // namespace kolo::mpi
