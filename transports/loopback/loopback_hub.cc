#include "transports/loopback/loopback_hub.h"

#include <cstring>
#include <string>
#include <utility>

#include "common/check.h"

namespace kolo::loopback {
namespace {

Status timed_out(int rank, const std::string& what) {
  return Status(Code::kTimeout, "loopback: rank " + std::to_string(rank) + " waited " +
                                    std::to_string(kHubTimeout.count()) + " s in " + what +
                                    " for ranks that never came");
}

}  // namespace

// --- Rendezvous ---------------------------------------------------------------

Rendezvous::Rendezvous(int size) : size_(size), deposits_(size), whats_(size, nullptr) {}

Status Rendezvous::exchange(int rank, const char* what, Bytes mine, std::vector<Bytes>* all) {
  KOLO_CHECK_GE(rank, 0);
  KOLO_CHECK_LT(rank, size_);
  std::unique_lock<std::mutex> lock(mu_);
  deposits_[rank] = std::move(mine);
  whats_[rank] = what;
  const uint64_t generation = generation_;
  if (++arrived_ == size_) {
    published_status_ = Status::OK();
    for (int r = 0; r < size_; ++r) {
      if (std::strcmp(whats_[r], whats_[0]) != 0) {
        published_status_ = internal_error(
            "loopback: ranks called different collectives at once: rank 0 is in " +
            std::string(whats_[0]) + ", rank " + std::to_string(r) + " in " + whats_[r]);
        break;
      }
    }
    published_ = std::move(deposits_);
    deposits_.assign(size_, Bytes());
    arrived_ = 0;
    ++generation_;
    cv_.notify_all();
  } else if (!cv_.wait_for(lock, kHubTimeout, [&] { return generation_ != generation; })) {
    return timed_out(rank, what);
  }
  if (!published_status_.ok()) return published_status_;
  if (all) *all = published_;
  return Status::OK();
}

// --- Mailboxes ----------------------------------------------------------------

Mailboxes::Mailboxes(int size) : arrived_(size) {}

void Mailboxes::send(int src, int dst, int tag, const void* data, size_t bytes) {
  const Key key(src, dst, tag);
  std::shared_ptr<RecvState> recv;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Box& box = boxes_[key];
    if (!box.waiting.empty()) {
      recv = std::move(box.waiting.front());
      box.waiting.pop_front();
    }
  }
  if (recv) {  // a receive is waiting: copy straight into it
    complete(dst, *recv, data, bytes);
    return;
  }
  // Copy outside the lock, then deliver (a receive may have been posted meanwhile).
  Bytes message(static_cast<const char*>(data), bytes);
  {
    std::lock_guard<std::mutex> lock(mu_);
    Box& box = boxes_[key];
    if (box.waiting.empty()) {
      box.messages.push_back(std::move(message));
      return;
    }
    recv = std::move(box.waiting.front());
    box.waiting.pop_front();
  }
  complete(dst, *recv, message.data(), message.size());
}

void Mailboxes::post_recv(int src, int dst, int tag, std::shared_ptr<RecvState> recv) {
  Bytes message;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Box& box = boxes_[Key(src, dst, tag)];
    if (box.messages.empty()) {
      box.waiting.push_back(std::move(recv));
      return;
    }
    KOLO_CHECK(box.waiting.empty());  // a message waits only while no receive does
    message = std::move(box.messages.front());
    box.messages.pop_front();
  }
  complete(dst, *recv, message.data(), message.size());
}

void Mailboxes::complete(int dst, RecvState& recv, const void* data, size_t bytes) {
  // Only this thread holds `recv` now; its owner reads it after seeing done.
  Status status;
  if (bytes != recv.bytes) {
    status = transport_error("loopback: received " + std::to_string(bytes) +
                             " bytes into a receive of " + std::to_string(recv.bytes));
  } else if (bytes > 0) {
    std::memcpy(recv.data, data, bytes);
  }
  std::lock_guard<std::mutex> lock(mu_);
  recv.status = std::move(status);
  recv.done = true;
  arrived_[dst].notify_all();
}

Status Mailboxes::wait(int dst, const RecvState& recv) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!arrived_[dst].wait_for(lock, kHubTimeout, [&] { return recv.done; })) {
    return timed_out(dst, "a receive");
  }
  return recv.status;
}

bool Mailboxes::test(const RecvState& recv) {
  std::lock_guard<std::mutex> lock(mu_);
  return recv.done;
}

// --- Doorbell -----------------------------------------------------------------

Doorbell::Doorbell(int size) : highest_(size) {
  for (auto& h : highest_) h.store(0, std::memory_order_relaxed);
}

void Doorbell::ring(int rank, uint64_t cycle) {
  std::atomic<uint64_t>& mine = highest_[rank];
  if (mine.load(std::memory_order_relaxed) < cycle + 1) {
    mine.store(cycle + 1, std::memory_order_release);
  }
}

bool Doorbell::rung(int rank, uint64_t cycle) const {
  for (size_t r = 0; r < highest_.size(); ++r) {
    if (static_cast<int>(r) == rank) continue;
    if (highest_[r].load(std::memory_order_acquire) >= cycle + 1) return true;
  }
  return false;
}

}  // namespace kolo::loopback
