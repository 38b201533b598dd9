// MpiCross: the MPI world's cross-node engine (transport/cross_engine.h) over a
// duplicate of MPI's cross communicator (the ranks with this rank's local rank,
// one per node): kolo's ring allreduce over MPI's point-to-point verbs on it, and
// MPI's own collectives for the rest — MPI_Iallgatherv and MPI_Ialltoallv in
// bytes, left in flight so that the hierarchical transport runs its node step
// meanwhile; broadcast and reducescatter through the "mpi" transport's (its types
// and ops), run to completion. The MPI factory offers it in place of kolo's
// engine over the world's verbs (algorithms/p2p_cross.h), which the registry
// makes in worlds without one of their own.
//
// Note [The MPI world's cross engine]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The MPI world's hierarchical keeps MPI's cross communicator rather than kolo's
// engine over the world's verbs, so that it stays what it was: the same allreduce
// (kolo's ring, on a communicator of its own), MPI's own allgatherv, alltoallv,
// broadcast and reducescatter across nodes (the same results, Note
// [Reducescatter order] in hierarchical_collectives.cc), and their requests in
// flight while the node step runs (kolo's engine runs each call to completion):
// at 2 hosts x 2 ranks its 64 MiB allgather and alltoall took about half and two
// thirds of kolo's engine's time, allreduce alike (docs/perf/hierarchical-cross.md).
//
// Contract: cross_engine.h's. create() is collective over the world (it
// duplicates comms->cross). max_call_bytes() is INT_MAX: MPI counts bytes in an
// int; a call above it fails with Unsupported. Waits consult the world's
// Liveness.
#pragma once

#include <memory>
#include <vector>

#include "algorithms/ring_allreduce.h"
#include "transport/cross_engine.h"
#include "transports/mpi/mpi_comm.h"
#include "transports/mpi/mpi_point_to_point.h"
#include "transports/mpi/mpi_transport.h"

namespace kolo::mpi {

class MpiCross : public transport::CrossEngine {
 public:
  static Status create(const SharedComms& comms, std::unique_ptr<MpiCross>* out);

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Status allreduce(void* data, int64_t count, DataType dtype, ReduceOp op) override {
    return ring_->run(data, data, count, dtype, op);
  }
  std::unique_ptr<transport::Work> allgatherv(const void* input, void* output,
                                              const std::vector<int64_t>& counts,
                                              const std::vector<int64_t>& displs,
                                              DataType dtype) override;
  std::unique_ptr<transport::Work> broadcast(void* data, int64_t count, DataType dtype,
                                             int root) override;
  std::unique_ptr<transport::Work> alltoallv(const void* input,
                                             const std::vector<int64_t>& send_counts,
                                             const std::vector<int64_t>& send_displs, void* output,
                                             const std::vector<int64_t>& recv_counts,
                                             const std::vector<int64_t>& recv_displs,
                                             DataType dtype) override;
  std::unique_ptr<transport::Work> reducescatter(const void* input, void* output,
                                                 const std::vector<int64_t>& counts,
                                                 DataType dtype, ReduceOp op) override;
  int64_t max_call_bytes() const override;
  void tune(const transport::Tuning& tuning) override {
    if (tuning.segment_bytes > 0) ring_->set_segment_bytes(tuning.segment_bytes);
  }

 private:
  MpiCross() = default;

  SharedComms comms_;  // data: the cross communicator's duplicate
  int rank_ = 0, size_ = 1;
  std::unique_ptr<MpiPointToPoint> p2p_;
  std::unique_ptr<algorithms::RingAllreduce> ring_;
  std::unique_ptr<MpiTransport> mpi_;  // broadcast, reducescatter
  // The call in flight's byte counts and displacements (MPI reads them until it ends).
  std::vector<int> send_bytes_, send_displs_, recv_bytes_, recv_displs_;
};

}  // namespace kolo::mpi
