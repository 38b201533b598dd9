#include "transports/mpi/node_doorbell.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <climits>
#include <cstdint>
#include <cstring>
#include <new>

#include "transports/mpi/mpi_check.h"
#include "transports/mpi/mpi_wait.h"

namespace kolo::mpi {
namespace {

// Futexes on shared (not private) mappings work across processes.
long futex(std::atomic<uint32_t>* word, int op, uint32_t value, const timespec* timeout) {
  static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), op, value, timeout, nullptr, 0);
}

}  // namespace

Status NodeDoorbell::create(MPI_Comm local, Liveness* alive, std::unique_ptr<NodeDoorbell>* out) {
  std::unique_ptr<NodeDoorbell> bell(new NodeDoorbell());
  bell->alive_ = alive;
  KOLO_MPI_CHECK(MPI_Comm_rank(local, &bell->local_rank_));
  KOLO_MPI_CHECK(MPI_Comm_size(local, &bell->local_size_));
  // One spare line: MPICH gives a single-rank communicator's window from the heap,
  // not on its own pages, so the lines start at the first cache line of what MPI
  // gives (the same offset in every process: a shared mapping starts on a page).
  const MPI_Aint bytes =
      bell->local_rank_ == 0 ? sizeof(Line) * (bell->local_size_ + 1) : 0;
  void* base = nullptr;
  KOLO_RETURN_IF_ERROR_AS_IS(arrive(local, alive));  // MPI_Win_allocate_shared blocks
  KOLO_MPI_CHECK(MPI_Win_allocate_shared(bytes, sizeof(Line), MPI_INFO_NULL, local, &base,
                                         &bell->win_));
  MPI_Aint size = 0;
  int disp = 0;
  KOLO_MPI_CHECK(MPI_Win_shared_query(bell->win_, 0, &size, &disp, &base));
  const uintptr_t first_line =
      (reinterpret_cast<uintptr_t>(base) + alignof(Line) - 1) / alignof(Line) * alignof(Line);
  bell->lines_ = reinterpret_cast<Line*>(first_line);
  if (bell->local_rank_ == 0) {
    for (int i = 0; i < bell->local_size_; ++i) {
      Line* line = new (&bell->lines_[i]) Line;
      line->rung.store(0, std::memory_order_relaxed);
      line->word.store(0, std::memory_order_relaxed);
      line->sleeping.store(0, std::memory_order_relaxed);
      line->woken.store(0, std::memory_order_relaxed);
    }
    std::atomic_thread_fence(std::memory_order_seq_cst);
  }
  KOLO_RETURN_IF_ERROR_AS_IS(arrive(local, alive));  // zeroed before anyone rings
  *out = std::move(bell);
  return Status::OK();
}

NodeDoorbell::~NodeDoorbell() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized || win_ == MPI_WIN_NULL) return;
  if (alive_ && alive_->failed()) return;  // MPI_Win_free would wait for a dead rank
  MPI_Win_free(&win_);
}

void NodeDoorbell::ring(uint64_t cycle) {
  for (int r = 0; r < local_size_; ++r) {
    if (r == local_rank_) continue;
    Line& peer = lines_[r];
    // Cycles run in lockstep, so the word only rises; still, keep the maximum.
    uint64_t current = peer.rung.load(std::memory_order_relaxed);
    while (current < cycle + 1 &&
           !peer.rung.compare_exchange_weak(current, cycle + 1, std::memory_order_seq_cst)) {
    }
    peer.word.fetch_add(1, std::memory_order_seq_cst);
    if (peer.sleeping.load(std::memory_order_seq_cst)) futex(&peer.word, FUTEX_WAKE, INT_MAX, nullptr);
  }
}

bool NodeDoorbell::rung(uint64_t cycle) const {
  return lines_[local_rank_].rung.load(std::memory_order_acquire) >= cycle + 1;
}

// Note [A wake bumps the word only for a sleeper]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Every submit calls wake() for its own coordinator, which is mostly awake or
// dozing, not asleep on the word. So wake() sets woken and bumps the futex word
// (an atomic read-modify-write) only when it finds the sleeper announced. No
// wake is lost: wait() announces (sleeping = 1) and then consumes woken, wake()
// sets woken and then reads sleeping, all sequentially consistent; so either
// the sleeper finds woken set and does not sleep, or wake() finds it announced
// and bumps the word it sleeps on (a futex wait on the old value returns at
// once) and wakes it. Giving the peers' words, the sleeping flag and the woken
// flag a cache line each (so that a submit touches no line a peer writes) was
// tried and measured slower: ResNet-50 steps (kolo-allreduce-perf -m resnet50,
// 2 ranks, 5 near runs each, interleaved) 17.1 ms against 16.4 with one line,
// for reasons not found.
void NodeDoorbell::wake() {
  Line& mine = lines_[local_rank_];
  mine.woken.store(1, std::memory_order_seq_cst);
  if (mine.sleeping.load(std::memory_order_seq_cst)) {
    mine.word.fetch_add(1, std::memory_order_seq_cst);
    futex(&mine.word, FUTEX_WAKE, INT_MAX, nullptr);
  }
}

void NodeDoorbell::sleep_on(Line& mine, uint32_t seen, std::chrono::microseconds timeout) {
  timespec ts;
  ts.tv_sec = static_cast<time_t>(timeout.count() / 1000000);
  ts.tv_nsec = static_cast<long>(timeout.count() % 1000000) * 1000;
  futex(&mine.word, FUTEX_WAIT, seen, &ts);  // returns at once if the word moved
}

}  // namespace kolo::mpi
