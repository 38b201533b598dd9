// HierarchicalCollectives: allgather(v), broadcast, alltoall(v) and reducescatter
// across several nodes of equal size, as an intra-node step through kolo's
// shared-memory engine (ShmCollectives) and an inter-node step through the cross
// engine (transport/cross_engine.h); the "hierarchical" transport's collectives other than
// allreduce (HierarchicalTransport::collective). The algorithms are explained at
// the top of hierarchical_collectives.cc.
//
// Contract (see transport/transport.h, CollectiveView): called by the coordinator
// thread only, for collectives in the same order on every rank; CPU memory; every
// dtype; reducescatter with SUM, MIN, MAX, PRODUCT and the whole Reduction. The
// view's rank indices are world ranks. Results are a flat collective's results
// (reducescatter: see Note [Reducescatter order]). create() is collective over the
// world (it agrees on the layout through the control plane).
//
// Where it runs: supports() answers Unsupported, the same on every rank, unless
// every node holds consecutive ranks (rank = node * local_size + local_rank, as
// mpiexec -ppn and kolorun's blocks place them; agreed at create()), and unless
// every call's bytes fit the cross engine's max_call_bytes() (MPI's int; alltoall:
// this rank's row and column, as the "mpi" transport's Note [Counts above INT_MAX]
// says).
//
// Errors: every call first agrees on the call across the world (Note [One verdict
// for every rank]): ranks whose views disagree all return the same Mismatch and
// the engine stays usable. A failed peer fails the call (the shm engine and the
// cross engine consult the world's Liveness).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "common/status.h"
#include "transport/control_plane.h"
#include "transport/cross_engine.h"
#include "transport/transport.h"
#include "transports/shm/collectives.h"

namespace kolo::hierarchical {

class HierarchicalCollectives {
 public:
  // `node` is the node layer's collectives engine (the intra-node step; it
  // outlives this), `cross` the cross-node engine; `control` is the world's.
  static Status create(transport::ControlPlane& control, shm::ShmCollectives& node,
                       std::shared_ptr<transport::CrossEngine> cross,
                       std::unique_ptr<HierarchicalCollectives>* out);

  Status supports(Collective op, const transport::CollectiveView& view) const;
  // Runs the collective to completion (synchronous).
  Status run(Collective op, const transport::CollectiveView& view);

 private:
  HierarchicalCollectives() = default;

  Status agree(Collective op, const transport::CollectiveView& view);
  void write_record(Collective op, const transport::CollectiveView& view);
  void summarize_node(Collective op, DataType dtype, bool node_ok);
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

  std::shared_ptr<transport::CrossEngine> cross_;
  shm::ShmCollectives* node_ = nullptr;
  int local_rank_ = 0, local_size_ = 1, node_index_ = 0, nodes_ = 1;
  bool consecutive_ = false;  // every node holds consecutive ranks (agreed)
  std::vector<int64_t> record_, records_, summary_, summaries_;  // agree()'s, reused
  std::vector<char> stage_;   // alltoall's gathered rows, reducescatter's partial sums
  std::vector<char> input_copy_;  // an alltoall input that overlaps its output
  std::vector<char> prescaled_;   // a reducescatter's prescaled input
  std::vector<int64_t> displs_, rdispls_;  // per call, reused
  // The cross call's layout, in elements (the engine reads it until the call ends).
  std::vector<int64_t> send_counts_, send_displs_, recv_counts_, recv_displs_;
};

}  // namespace kolo::hierarchical
