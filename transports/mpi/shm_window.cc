#include "transports/mpi/shm_window.h"

#include <cstdint>
#include <cstring>
#include <string>

#include "transports/mpi/mpi_check.h"
#include "transports/mpi/mpi_wait.h"

namespace kolo::mpi {
namespace {

constexpr size_t kCacheLine = 64;

char* align_up(char* p) {
  const uintptr_t a = (reinterpret_cast<uintptr_t>(p) + kCacheLine - 1) / kCacheLine * kCacheLine;
  return reinterpret_cast<char*>(a);
}

}  // namespace

Status ShmWindow::create(MPI_Comm local, size_t bytes_per_rank, Liveness* alive,
                         std::unique_ptr<ShmWindow>* out) {
  std::unique_ptr<ShmWindow> window(new ShmWindow());
  window->alive_ = alive;
  int size = 0;
  KOLO_MPI_CHECK(MPI_Comm_rank(local, &window->local_rank_));
  KOLO_MPI_CHECK(MPI_Comm_size(local, &size));
  // Round up so every segment (with alloc_shared_noncontig, each on its own
  // pages) starts page-aligned and the next one does too.
  bytes_per_rank = (bytes_per_rank + kSegmentAlign - 1) / kSegmentAlign * kSegmentAlign;
  window->bytes_per_rank_ = bytes_per_rank;

  KOLO_RETURN_IF_ERROR_AS_IS(arrive(local, alive));
  MPI_Info info;
  KOLO_MPI_CHECK(MPI_Info_create(&info));
  MPI_Info_set(info, "alloc_shared_noncontig", "true");
  void* mine = nullptr;
  const size_t allocated = bytes_per_rank + kCacheLine;
  int rc = MPI_Win_allocate_shared(static_cast<MPI_Aint>(allocated), 1, info, local, &mine,
                                   &window->win_);
  MPI_Info_free(&info);
  if (rc != MPI_SUCCESS) return mpi_error(rc, "MPI_Win_allocate_shared", __FILE__, __LINE__);

  // MPICH aligns segments to pages with noncontig, but not for a single-rank
  // communicator; so every segment has kCacheLine spare bytes and starts at the
  // first cache line of what MPI gives (every rank computes the same pointer).
  window->segments_.resize(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) {
    MPI_Aint bytes = 0;
    int disp_unit = 0;
    void* base = nullptr;
    KOLO_MPI_CHECK(MPI_Win_shared_query(window->win_, r, &bytes, &disp_unit, &base));
    if (static_cast<size_t>(bytes) < allocated) {
      return internal_error("shared window segment of local rank " + std::to_string(r) +
                            " is " + std::to_string(bytes) + " bytes, not " +
                            std::to_string(allocated));
    }
    window->segments_[static_cast<size_t>(r)] = align_up(static_cast<char*>(base));
  }
  // Pre-fault this rank's own pages: zeroed counters are also the protocol's start.
  std::memset(mine, 0, allocated);
  // No peer may read this segment's counters before they are zeroed.
  KOLO_RETURN_IF_ERROR_AS_IS(arrive(local, alive));
  *out = std::move(window);
  return Status::OK();
}

ShmWindow::~ShmWindow() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized || win_ == MPI_WIN_NULL) return;
  if (alive_ && alive_->failed()) return;  // MPI_Win_free would wait for a dead rank
  MPI_Win_free(&win_);
}

}  // namespace kolo::mpi
