// ShmWindow: one MPI-3 shared-memory window over the node communicator, through
// which the ranks of a node read and write each other's memory with plain loads
// and stores.
//
// Contract:
// - create() is collective over `local` (MPI_Win_allocate_shared), runs once at
//   world creation, zeroes this rank's segment (which also pre-faults its pages,
//   so no page fault lands on the hot path) and returns after every rank of the
//   node has done so.
// - Each rank owns `bytes_per_rank` bytes starting at segment(local_rank); the
//   segments of the other ranks of the node are reachable at segment(r) (queried
//   with MPI_Win_shared_query). Every segment is cache-line aligned.
// - Synchronisation is the user's: the window makes no MPI call after create().
//   Users publish with release stores and observe with acquire loads (see
//   shm_transport.cc).
// - create() waits with `alive` (mpi_wait.h): first until every rank of the node
//   has arrived (a bounded barrier before the blocking MPI_Win_allocate_shared),
//   then until every rank has zeroed its segment.
// - The destructor frees the window (collective over the node, like every world
//   teardown) unless MPI is already finalised or `alive` says a peer failed (the
//   free would wait for the dead rank forever; the window is leaked instead).
//   `alive` (may be null) must outlive the window.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <memory>
#include <vector>

#include "common/status.h"
#include "transports/mpi/mpi_wait.h"

namespace kolo::mpi {

class ShmWindow {
 public:
  static constexpr size_t kSegmentAlign = 4096;

  static Status create(MPI_Comm local, size_t bytes_per_rank, Liveness* alive,
                       std::unique_ptr<ShmWindow>* out);
  ~ShmWindow();
  ShmWindow(const ShmWindow&) = delete;
  ShmWindow& operator=(const ShmWindow&) = delete;

  int local_rank() const { return local_rank_; }
  int local_size() const { return static_cast<int>(segments_.size()); }
  size_t bytes_per_rank() const { return bytes_per_rank_; }
  // Replaces the Liveness the destructor asks (for a window made before its
  // owner's own check could run: the PeerMonitor's board).
  void set_liveness(Liveness* alive) { alive_ = alive; }
  char* segment(int local_rank) const { return segments_[static_cast<size_t>(local_rank)]; }

 private:
  ShmWindow() = default;

  MPI_Win win_ = MPI_WIN_NULL;
  Liveness* alive_ = nullptr;
  int local_rank_ = 0;
  size_t bytes_per_rank_ = 0;
  std::vector<char*> segments_;
};

}  // namespace kolo::mpi
