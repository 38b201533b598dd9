#include "transports/shm/doorbell.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <climits>
#include <cstdint>

#include "common/check.h"

namespace kolo::shm {
namespace {

// Futexes on shared (not private) mappings work across processes.
long futex(std::atomic<uint32_t>* word, int op, uint32_t value, const timespec* timeout) {
  static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), op, value, timeout, nullptr, 0);
}

}  // namespace

Status NodeDoorbell::create(std::shared_ptr<Node> node, std::unique_ptr<NodeDoorbell>* out) {
  static_assert(sizeof(Line) == Layout::kLine, "a doorbell line is one cache line");
  KOLO_RETURN_IF_ERROR(node->claim(Node::Region::kDoorbell, "the node's doorbell"));
  std::unique_ptr<NodeDoorbell> bell(new NodeDoorbell(std::move(node)));
  bell->local_rank_ = bell->node_->local_rank();
  bell->local_size_ = bell->node_->local_size();
  *out = std::move(bell);  // the lines were zeroed by Node::create: nothing rung
  return Status::OK();
}

void NodeDoorbell::ring(uint64_t cycle) {
  for (int r = 0; r < local_size_; ++r) {
    if (r == local_rank_) continue;
    Line& peer = line(r);
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
  return line(local_rank_).rung.load(std::memory_order_acquire) >= cycle + 1;
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
  Line& mine = line(local_rank_);
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

}  // namespace kolo::shm
