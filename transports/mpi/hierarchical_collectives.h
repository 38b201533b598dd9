// HierarchicalCollectives: allgather(v), broadcast, alltoall(v) and reducescatter
// across several nodes of equal size, as an intra-node step through kolo's
// shared-memory engine (ShmCollectives) and an inter-node step through MPI over
// the cross communicator; the "hierarchical" transport's collectives other than
// allreduce (HierarchicalTransport::collective). The algorithms are explained at
// the top of hierarchical_collectives.cc.
//
// Contract (see transport/transport.h, CollectiveView): called by the coordinator
// thread only, for collectives in the same order on every rank; CPU memory; every
// dtype; reducescatter with SUM, MIN, MAX, PRODUCT and the whole Reduction. The
// view's rank indices are world ranks. Results are MPI's own collectives' results
// (reducescatter: see Note [Reducescatter order]). create() is collective over the
// world (it duplicates the cross communicator and agrees on the layout).
//
// Where it runs: supports() answers Unsupported, the same on every rank, unless
// every node holds consecutive ranks (rank = node * local_size + local_rank, as
// mpiexec -ppn places them; agreed at create()), and unless every count and
// displacement fits MPI's int (alltoall: of this rank's row and column, as the
// "mpi" transport's Note [Counts above INT_MAX] says).
//
// Errors: every call first agrees on the call across the world (Note [One verdict
// for every rank]): ranks whose views disagree all return the same Mismatch and
// the engine stays usable. A failed peer fails the call (the shm engine and every
// MPI wait consult the world's Liveness).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "common/status.h"
#include "transport/transport.h"
#include "transports/mpi/mpi_comm.h"
#include "transports/mpi/mpi_transport.h"
#include "transports/shm/collectives.h"

namespace kolo::mpi {

class HierarchicalCollectives {
 public:
  // `node` is the node layer's collectives engine (the intra-node step).
  static Status create(const SharedComms& comms, std::unique_ptr<shm::ShmCollectives> node,
                       std::unique_ptr<HierarchicalCollectives>* out);

  Status supports(transport::CollectiveOp op, const transport::CollectiveView& view) const;
  // Runs the collective to completion (synchronous).
  Status run(transport::CollectiveOp op, const transport::CollectiveView& view);

 private:
  HierarchicalCollectives() = default;

  Status agree(transport::CollectiveOp op, const transport::CollectiveView& view);
  void write_record(transport::CollectiveOp op, const transport::CollectiveView& view);
  void summarize_node(transport::CollectiveOp op, DataType dtype, bool node_ok);
  Status verdict() const;
  Status allgather(const transport::CollectiveView& view);
  Status broadcast(const transport::CollectiveView& view);
  Status alltoall(const transport::CollectiveView& view);
  Status reducescatter(const transport::CollectiveView& view);
  // displs: the prefix sums of counts (one more entry: the total).
  static void prefix(const std::vector<int64_t>& counts, std::vector<int64_t>* displs);
  // The l counts of node m's ranks.
  void node_counts(const std::vector<int64_t>& counts, int m, std::vector<int64_t>* out) const;
  int64_t most_forwarded(size_t elem) const;
  int world_rank(int node, int local) const { return node * local_size_ + local; }

  SharedComms comms_;        // data: the cross communicator's duplicate
  std::unique_ptr<MpiTransport> cross_;  // MPI's collectives over comms_->data
  std::unique_ptr<shm::ShmCollectives> node_;
  int local_rank_ = 0, local_size_ = 1, node_index_ = 0, nodes_ = 1;
  bool consecutive_ = false;  // every node holds consecutive ranks (agreed)
  std::vector<int64_t> record_, records_, summary_, summaries_;  // agree()'s, reused
  std::vector<char> stage_;   // alltoall's gathered rows, reducescatter's partial sums
  std::vector<char> input_copy_;  // an alltoall input that overlaps its output
  std::vector<char> prescaled_;   // a reducescatter's prescaled input
  std::vector<int64_t> displs_, rdispls_;  // per call, reused
  std::vector<int> send_bytes_, send_displs_, recv_bytes_, recv_displs_;  // the cross call's
};

}  // namespace kolo::mpi
