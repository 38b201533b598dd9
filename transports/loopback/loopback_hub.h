// The hub: the shared state through which loopback ranks (threads of one process)
// talk. One Hub per create_worlds() call, owned jointly (shared_ptr) by every
// world's control plane, point-to-point verbs and transports, so it lives until
// the last of them is gone.
//
// Waiting is on condition variables, never a spin. A wait that lasts longer than
// kHubTimeout means a rank never came (a bug in the test or in the coordinator);
// it returns KOLO_ERR_TIMEOUT instead of hanging the test run, and the world is
// broken from then on.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>

#include "common/status.h"
#include "transport/control_plane.h"

namespace kolo::loopback {

using transport::Bytes;

constexpr std::chrono::seconds kHubTimeout{60};

// A generation-counted rendezvous of `size` ranks, one thread each. Every rank
// deposits a blob, naming the collective it is in; the last to arrive publishes
// all blobs in rank order and opens the next generation; every rank leaves with
// a copy. A rank cannot enter generation g+1 before all have left generation g's
// wait, because g+1 only completes when every rank has arrived, so the published
// blobs stay intact until each rank has copied them.
//
// Ranks that name different collectives in one generation get an internal error
// (calls out of order are a bug in the caller).
class Rendezvous {
 public:
  explicit Rendezvous(int size);

  Status exchange(int rank, const char* what, Bytes mine, std::vector<Bytes>* all);

 private:
  const int size_;
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t generation_ = 0;
  int arrived_ = 0;
  std::vector<Bytes> deposits_;
  std::vector<const char*> whats_;
  std::vector<Bytes> published_;
  Status published_status_;
};

// A posted receive: where the bytes go, and whether they have arrived.
struct RecvState {
  void* data = nullptr;
  size_t bytes = 0;
  bool done = false;  // guarded by Mailboxes::mu_
  Status status;      // set before done
};

// Point-to-point messages, keyed by (src, dst, tag), FIFO per key. A send copies
// its bytes (straight into a waiting receive's buffer, else into the mailbox), so
// it is complete when send() returns. A receive completes when its message is
// there. Per key, messages and waiting receives pair up in the order they were
// sent and posted.
class Mailboxes {
 public:
  explicit Mailboxes(int size);

  void send(int src, int dst, int tag, const void* data, size_t bytes);
  void post_recv(int src, int dst, int tag, std::shared_ptr<RecvState> recv);

  // Blocks rank `dst` until `recv` is done; returns its status.
  Status wait(int dst, const RecvState& recv);
  bool test(const RecvState& recv);

 private:
  using Key = std::tuple<int, int, int>;  // src, dst, tag
  struct Box {
    std::deque<Bytes> messages;                      // sent, not yet received
    std::deque<std::shared_ptr<RecvState>> waiting;  // posted, not yet matched
  };

  // Copies a message into a matched receive and marks it done.
  void complete(int dst, RecvState& recv, const void* data, size_t bytes);

  std::mutex mu_;
  std::vector<std::condition_variable> arrived_;  // one per destination rank
  std::map<Key, Box> boxes_;
};

// The doorbell of ControlPlane::ring/rung: per rank, one more than the highest
// cycle it has rung (0: none). Only rank r writes slot r.
class Doorbell {
 public:
  explicit Doorbell(int size);
  void ring(int rank, uint64_t cycle);
  bool rung(int rank, uint64_t cycle) const;

 private:
  std::vector<std::atomic<uint64_t>> highest_;
};

struct Hub {
  explicit Hub(int size)
      : size(size), control(size), transport(size), mailboxes(size), doorbell(size) {}

  const int size;
  Rendezvous control;    // the control plane's collectives
  Rendezvous transport;  // the loopback transport's collectives (kept apart from control)
  Mailboxes mailboxes;
  Doorbell doorbell;

  // The hubs of this world's process sets, by set id: the first member to build
  // its world makes the set's hub, the others find it here.
  std::shared_ptr<Hub> subset_hub(int32_t id, int members) {
    std::lock_guard<std::mutex> lock(subsets_mu);
    std::shared_ptr<Hub>& h = subsets[id];
    if (!h) h = std::make_shared<Hub>(members);
    return h;
  }
  std::mutex subsets_mu;
  std::map<int32_t, std::shared_ptr<Hub>> subsets;
};

}  // namespace kolo::loopback
