// The engine's operations for its callers (engine.h): point-to-point, control
// messages and the doorbell.
#include <cstring>

#include "common/backoff.h"
#include "common/check.h"
#include "transports/socket/engine.h"

namespace kolo::socket {

// See Note [Waiting without spinning].
template <typename Ready>
Status Engine::wait_until(std::unique_lock<std::mutex>& lock, Ready ready) {
  Backoff backoff;
  bool spinning = true;
  while (true) {
    if (ready()) return Status::OK();
    if (!failed_.ok()) return failed_;
    if (spinning) {
      lock.unlock();
      spinning = backoff.pause_awake();
      lock.lock();
      continue;
    }
    cv_.wait(lock);
  }
}

Status Engine::usable(int rank, const char* what) const {
  if (!failed_.ok()) return failed_;
  if (rank < 0 || rank >= options_.size)
    return invalid_argument(std::string(what) + ": rank " + std::to_string(rank) +
                            " outside 0.." + std::to_string(options_.size - 1));
  if (rank != options_.rank && peers_[rank]->closed)
    return Status(Code::kShutdown, std::string(what) + ": rank " + std::to_string(rank) +
                                       " has left (it shut down)");
  return Status::OK();
}

Status Engine::isend(uint32_t channel, int to, const void* data, size_t bytes, int tag,
                     RequestId* id) {
  std::lock_guard<std::mutex> lock(mu_);
  KOLO_RETURN_IF_ERROR_AS_IS(usable(to, "isend"));
  *id = next_request_++;
  Request& r = requests_[*id];
  r.send = true;
  r.peer = to;
  r.data = static_cast<char*>(const_cast<void*>(data));
  r.bytes = bytes;
  if (to == options_.rank) {  // to itself: delivered here, as an unexpected message would be
    auto posted = posted_.find(MatchKey{channel, to, tag});
    while (posted != posted_.end() && !posted->second.empty()) {
      const RequestId recv = posted->second.front();
      posted->second.pop_front();
      auto it = requests_.find(recv);
      if (it == requests_.end()) continue;
      if (it->second.bytes != bytes) {
        complete(recv, invalid_argument("received " + std::to_string(bytes) +
                                        " bytes from this rank, posted " +
                                        std::to_string(it->second.bytes)));
      } else {
        if (bytes > 0) std::memcpy(it->second.data, data, bytes);
        complete(recv, Status::OK());
      }
      complete(*id, Status::OK());
      return Status::OK();
    }
    Unexpected u;
    u.data.assign(static_cast<const char*>(data), bytes);
    unexpected_[MatchKey{channel, to, tag}].push_back(std::move(u));
    complete(*id, Status::OK());
    return Status::OK();
  }
  OutItem item;
  if (bytes <= kEagerBytes) {
    encode_header(FrameHeader{FrameType::kEager, options_.rank,
                              static_cast<uint32_t>(prefix_bytes(FrameType::kEager) + bytes),
                              options_.generation}, &item.head);
    item.head += encode_eager_prefix(EagerPrefix{channel, tag});
    item.body = r.data;
    item.body_bytes = bytes;
    item.request = *id;
  } else {
    const uint64_t message = next_message_++;
    announced_[message] = *id;
    encode_header(FrameHeader{FrameType::kRts, options_.rank,
                              static_cast<uint32_t>(prefix_bytes(FrameType::kRts)),
                              options_.generation}, &item.head);
    item.head += encode_rts(RtsMsg{channel, tag, message, bytes});
  }
  enqueue(*peers_[to], std::move(item));
  return Status::OK();
}

Status Engine::irecv(uint32_t channel, int from, void* data, size_t bytes, int tag,
                     RequestId* id) {
  std::lock_guard<std::mutex> lock(mu_);
  const MatchKey key{channel, from, tag};
  auto waiting = unexpected_.find(key);
  const bool arrived = waiting != unexpected_.end() && !waiting->second.empty();
  // A message that arrived whole before its sender left is still received (one
  // only announced cannot be: its bytes never come).
  Status usable_now = usable(from, "irecv");
  if (!usable_now.ok() && !(arrived && failed_.ok() && !waiting->second.front().rts))
    return usable_now;
  *id = next_request_++;
  Request& r = requests_[*id];
  r.peer = from;
  r.data = static_cast<char*>(data);
  r.bytes = bytes;
  if (!arrived) {
    posted_[key].push_back(*id);
    return Status::OK();
  }
  Unexpected u = std::move(waiting->second.front());
  waiting->second.pop_front();
  if (waiting->second.empty()) unexpected_.erase(waiting);
  if (u.rts) {
    accept_rts(*peers_[from], u.message, u.bytes, *id);
    return Status::OK();
  }
  if (u.data.size() != bytes) {
    complete(*id, invalid_argument("received " + std::to_string(u.data.size()) +
                                   " bytes from rank " + std::to_string(from) + ", posted " +
                                   std::to_string(bytes)));
    return Status::OK();
  }
  if (bytes > 0) std::memcpy(data, u.data.data(), bytes);
  r.moved = bytes;
  complete(*id, Status::OK());
  return Status::OK();
}

Status Engine::wait(RequestId id) {
  std::unique_lock<std::mutex> lock(mu_);
  if (requests_.find(id) == requests_.end())
    return internal_error("wait on request " + std::to_string(id) + ", which is not posted");
  Status s = wait_until(lock, [&] { return requests_[id].done; });
  if (s.ok()) s = requests_[id].status;
  requests_.erase(id);  // after a failure too: forget_callers let go of its buffer
  return s;
}

Status Engine::test(RequestId id, bool* done) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = requests_.find(id);
  if (it == requests_.end())
    return internal_error("test of request " + std::to_string(id) + ", which is not posted");
  *done = it->second.done;
  if (!*done && !failed_.ok()) return failed_;
  return Status::OK();
}

Status Engine::send_control(int to, uint32_t channel, uint64_t key, std::string blob) {
  if (blob.size() > kMaxControlBytes)
    return invalid_argument("a control-plane blob of " + std::to_string(blob.size()) +
                            " bytes (at most " + std::to_string(kMaxControlBytes) + ")");
  std::lock_guard<std::mutex> lock(mu_);
  KOLO_RETURN_IF_ERROR_AS_IS(usable(to, "control message"));
  OutItem item;
  encode_header(FrameHeader{FrameType::kControl, options_.rank,
                            static_cast<uint32_t>(prefix_bytes(FrameType::kControl) + blob.size()),
                            options_.generation}, &item.head);
  item.head += encode_control_prefix(ControlPrefix{channel, key});
  item.body_bytes = blob.size();
  item.owned = std::move(blob);
  item.owns = true;
  enqueue(*peers_[to], std::move(item));
  return Status::OK();
}

Status Engine::recv_control(int from, uint32_t channel, uint64_t key, std::string* blob) {
  std::unique_lock<std::mutex> lock(mu_);
  const auto k = std::make_tuple(channel, from, key);
  Status s = wait_until(lock, [&] {
    return mailbox_.count(k) > 0 || peers_[from]->closed;
  });
  auto it = mailbox_.find(k);
  if (s.ok() && it == mailbox_.end())
    s = usable(from, "control message");  // it left (in order) without sending this
  if (!s.ok()) return s;
  *blob = std::move(it->second);
  mailbox_.erase(it);
  return Status::OK();
}

Status Engine::ring(uint32_t channel, uint64_t cycle, const std::vector<int>& to) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!failed_.ok()) return failed_;
  const std::string prefix = encode_ring(RingMsg{channel, cycle});
  for (int r : to) {
    if (r == options_.rank || peers_[r]->closed) continue;
    OutItem item;
    encode_header(FrameHeader{FrameType::kRing, options_.rank, static_cast<uint32_t>(prefix.size()),
                              options_.generation}, &item.head);
    item.head += prefix;
    enqueue(*peers_[r], std::move(item));
  }
  return Status::OK();
}

bool Engine::rung(uint32_t channel, uint64_t cycle) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!failed_.ok()) return true;  // a cycle then finds the failure
  auto it = bells_.find(channel);
  return it != bells_.end() && it->second.any && it->second.highest >= cycle;
}

void Engine::wait_for_ring(uint32_t channel, uint64_t cycle, std::chrono::microseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  Bell& bell = bells_[channel];
  cv_.wait_for(lock, timeout, [&] {
    return bell.woken || (bell.any && bell.highest >= cycle) || !failed_.ok();
  });
  bell.woken = false;
}

void Engine::wake(uint32_t channel) {
  std::lock_guard<std::mutex> lock(mu_);
  bells_[channel].woken = true;
  cv_.notify_all();
}

void Engine::close_channel(uint32_t channel) {
  std::lock_guard<std::mutex> lock(mu_);
  closed_channels_.push_back(channel);
  bells_.erase(channel);
  for (auto it = mailbox_.begin(); it != mailbox_.end();)
    it = std::get<0>(it->first) == channel ? mailbox_.erase(it) : std::next(it);
  for (auto it = unexpected_.begin(); it != unexpected_.end();)
    it = std::get<0>(it->first) == channel ? unexpected_.erase(it) : std::next(it);
}

}  // namespace kolo::socket
