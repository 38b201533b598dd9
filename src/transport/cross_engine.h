// CrossEngine: the cross-node step of a hierarchical transport — collectives among
// the ranks that share this rank's local rank, one per node, in node order (group
// rank i is the rank of this local rank on node i). The registry composes one into
// "hierarchical" (transports/hierarchical) and into the device transport's
// hierarchical allreduce: kolo's own over any world's point-to-point verbs
// (algorithms/p2p_cross.h), or a world's own where it has a better one (the MPI
// world's over MPI's cross communicator, transports/mpi/mpi_cross.h).
//
// Contract:
// - Coordinator thread only; every call in the same order, with the same counts,
//   dtype, root and op, on every rank of the group.
// - allreduce runs to completion. The others start the step and return its Work;
//   the caller may run its node step meanwhile and then waits on it before the
//   next call (an engine may finish before returning: CompletedWork). Buffers
//   stay valid, and the count vectors unchanged, until the Work has been waited
//   on; one call is in flight at a time.
// - Counts and displacements are in elements of `dtype`; layouts as
//   P2PCollectives' explicit forms (algorithms/p2p_collectives.h). reducescatter
//   and allreduce take SUM, MIN, MAX, PRODUCT (no factors).
// - max_call_bytes(): the most bytes one rank's side of one call may hold, and
//   the most elements of one reducescatter (MPI's int counts: bytes where the
//   engine moves bytes, elements of the dtype where it reduces); a caller
//   answers Unsupported above it, the same on every rank.
// - Errors: a failed peer or a verb's error fails the call's Status.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "common/dtype.h"
#include "common/status.h"
#include "transport/transport.h"

namespace kolo::transport {

class CrossEngine {
 public:
  virtual ~CrossEngine() = default;

  // This rank's node index in the group, and the number of nodes.
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // In place on host memory.
  virtual Status allreduce(void* data, int64_t count, DataType dtype, ReduceOp op) = 0;

  // Group rank r's block lands at output + displs[r] on every rank; this rank's
  // comes from `input`, which may already be its place in output.
  virtual std::unique_ptr<Work> allgatherv(const void* input, void* output,
                                           const std::vector<int64_t>& counts,
                                           const std::vector<int64_t>& displs, DataType dtype) = 0;
  // `count` elements of `root`'s data land in every rank's data.
  virtual std::unique_ptr<Work> broadcast(void* data, int64_t count, DataType dtype, int root) = 0;
  // send_counts[d] elements from input + send_displs[d] go to group rank d; from
  // rank s, recv_counts[s] elements land at output + recv_displs[s].
  virtual std::unique_ptr<Work> alltoallv(const void* input,
                                          const std::vector<int64_t>& send_counts,
                                          const std::vector<int64_t>& send_displs, void* output,
                                          const std::vector<int64_t>& recv_counts,
                                          const std::vector<int64_t>& recv_displs,
                                          DataType dtype) = 0;
  // input: sum(counts) elements, group rank r's block after the blocks before
  // it; the op over every rank's input of this rank's block lands in `output`.
  virtual std::unique_ptr<Work> reducescatter(const void* input, void* output,
                                              const std::vector<int64_t>& counts, DataType dtype,
                                              ReduceOp op) = 0;

  virtual int64_t max_call_bytes() const { return INT64_MAX; }
  // As Transport::tune.
  virtual void tune(const Tuning& tuning) {}
};

}  // namespace kolo::transport
