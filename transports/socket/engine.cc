// The engine's life: start, the progress thread, liveness and the orderly close.
// Frames in and out are in engine_io.cc; the callers' operations in engine_ops.cc.
#include "transports/socket/engine.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "common/check.h"
#include "common/logging.h"

namespace kolo::socket {
namespace {


constexpr uint64_t kWakeKey = 0;  // epoll data of the eventfd; a peer's is rank + 1

}  // namespace

Engine::Engine(const EngineOptions& options) : options_(options) {}

Status Engine::start(const EngineOptions& options, std::vector<PeerLink> links,
                     std::shared_ptr<Engine>* out) {
  if (options.peer_timeout.count() <= 0) return invalid_argument("peer timeout must be positive");
  if (static_cast<int>(links.size()) != options.size - 1)
    return internal_error("engine: " + std::to_string(links.size()) + " links for a world of " +
                          std::to_string(options.size));
  std::shared_ptr<Engine> e(new Engine(options));
  e->peers_.resize(static_cast<size_t>(options.size));
  e->epoll_ = epoll_create1(EPOLL_CLOEXEC);
  e->wake_.reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (e->epoll_ < 0 || !e->wake_.valid())
    return transport_error(std::string("epoll/eventfd: ") + std::strerror(errno));
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kWakeKey;
  epoll_ctl(e->epoll_, EPOLL_CTL_ADD, e->wake_.get(), &ev);
  const auto now = Clock::now();
  e->watched_ = now;
  for (PeerLink& link : links) {
    const int r = link.rank;
    if (r < 0 || r >= options.size || r == options.rank || e->peers_[r])
      return internal_error("engine: a link to rank " + std::to_string(r));
    KOLO_RETURN_IF_ERROR(set_nonblocking(link.fd.get(), true));
    auto p = std::make_unique<Peer>();
    p->heard = p->sent = now;
    p->link = std::move(link);
    ev.events = EPOLLIN;
    ev.data.u64 = static_cast<uint64_t>(r) + 1;
    if (epoll_ctl(e->epoll_, EPOLL_CTL_ADD, p->link.fd.get(), &ev) != 0)
      return transport_error(std::string("epoll_ctl: ") + std::strerror(errno));
    e->peers_[r] = std::move(p);
  }
  Engine* raw = e.get();
  e->thread_ = std::thread([raw] { raw->progress_loop(); });
  *out = std::move(e);
  return Status::OK();
}

Engine::~Engine() {
  if (thread_.joinable()) close_orderly();
  for (auto& p : peers_)
    if (p) p->link.fd.reset();
  if (epoll_ >= 0) close(epoll_);
}

const std::string& Engine::host_of(int rank) const { return peers_.at(rank)->link.host; }

bool Engine::left(int rank) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (rank < 0 || rank >= static_cast<int>(peers_.size()) || !peers_[rank]) return false;
  return peers_[rank]->bye;
}

std::chrono::milliseconds Engine::beat_interval() const {
  return std::max(std::chrono::milliseconds(10), options_.peer_timeout / 5);
}

void Engine::progress_loop() {
  epoll_event events[64];
  const int nap_ms = static_cast<int>(std::clamp<int64_t>(beat_interval().count() / 2, 5, 500));
  while (true) {
    const int n = epoll_wait(epoll_, events, 64, nap_ms);
    std::unique_lock<std::mutex> lock(mu_);
    if (quit_) return;
    for (int i = 0; i < n; ++i) {
      const uint64_t key = events[i].data.u64;
      if (key == kWakeKey) {
        uint64_t count = 0;
        if (read(wake_.get(), &count, sizeof count) < 0) {
          // Nothing to drain: another wake-up got it.
        }
        continue;
      }
      Peer* p = peers_[key - 1].get();
      if (p == nullptr || p->closed) continue;
      if (events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) read_some(*p);
      if (!p->closed && (events[i].events & EPOLLOUT)) write_some(*p);
    }
    beat_and_watch(Clock::now());
  }
}

// Heartbeats out, silence in: see Note [Liveness from the sockets].
void Engine::beat_and_watch(Clock::time_point now) {
  // This rank itself did not run for a while (stopped, or starved of the CPU):
  // it could not hear its peers then, so that time is not their silence (Note
  // [Silence is counted only while this process listens] in transport/liveness.h).
  const bool was_away = now - watched_ > beat_interval();
  watched_ = now;
  std::string why;
  for (auto& slot : peers_) {
    if (!slot || slot->closed) continue;
    Peer& p = *slot;
    if (was_away) p.heard = std::max(p.heard, now - beat_interval());
    if (!stopping_ && p.out.empty() && now - p.sent >= beat_interval()) {
      OutItem beat;
      encode_header(FrameHeader{FrameType::kHeartbeat, options_.rank, 0, options_.generation}, &beat.head);
      enqueue(p, std::move(beat));
    }
    if (!failed_.ok() || p.bye) continue;
    const auto silent = now - std::max(p.heard, p.traced);
    // Held by a debugger: silence counts from the last time it was seen held, so
    // it is looked at as soon as it is quieter than two beats, and once released
    // it has a full timeout to beat again.
    if (silent > 2 * beat_interval() && p.link.same_host && transport::held_by_debugger(p.link.pid)) {
      p.traced = now;
      continue;
    }
    if (silent <= options_.peer_timeout) continue;
    read_some(p);  // what waits in the socket was heard
    if (p.closed || now - p.heard <= options_.peer_timeout) continue;
    why += std::string(why.empty() ? "" : "; ") + "rank " + std::to_string(p.link.rank) + " (" +
           p.link.address + ", pid " + std::to_string(p.link.pid) + " on " + p.link.host +
           ") has not been heard from for " + seconds_text(now - p.heard) +
           " (KOLO_PEER_TIMEOUT_SECONDS is " + seconds_text(options_.peer_timeout) + ")";
  }
  if (!why.empty()) declare_locked((why.find("; ") == std::string::npos ? "a peer failed: "
                                                                         : "peers failed: ") + why);
}

Status Engine::check() {
  std::lock_guard<std::mutex> lock(mu_);
  return failed_;
}

bool Engine::failed() const { return failed_flag_.load(std::memory_order_acquire); }

void Engine::declare_failure(const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  declare_locked(why);
}

void Engine::declare_locked(const std::string& why) {
  if (!failed_.ok()) return;
  failed_ = Status(Code::kRankFailed, why);
  failed_flag_.store(true, std::memory_order_release);
  KOLO_LOG(kDebug) << "socket world: " << why;
  const std::string text = why.substr(0, kMaxReasonBytes);
  for (auto& slot : peers_) {
    if (!slot || slot->closed) continue;
    forget_callers(*slot);
    // Note [Liveness from the sockets]: the verdict goes on to every peer.
    OutItem verdict;
    encode_header(FrameHeader{FrameType::kVerdict, options_.rank,
                              static_cast<uint32_t>(text.size()), options_.generation},
                  &verdict.head);
    verdict.owned = text;
    verdict.owns = true;
    verdict.body_bytes = text.size();
    enqueue(*slot, std::move(verdict));
  }
  for (auto& [channel, bell] : bells_)
    if (bell.waker) bell.waker();
  cv_.notify_all();
}

// After a failure, waits return at once and their callers may free their
// buffers: nothing may be read from or written into them any more. A frame half
// written keeps going from a copy (the stream stays whole for the verdict).
void Engine::forget_callers(Peer& p) {
  std::deque<OutItem> kept;
  for (OutItem& item : p.out) {
    const bool borrowed = !item.owns && item.body_bytes > 0;
    if (borrowed && item.written == 0) continue;
    if (borrowed) {
      item.owned.assign(item.body, item.body_bytes);
      item.owns = true;
    }
    item.request = 0;
    kept.push_back(std::move(item));
  }
  p.out = std::move(kept);
  InFrame& f = p.in;
  if (f.stage == InFrame::kBody && f.request != 0) {
    f.buf.assign(f.body_bytes, '\0');
    f.dst = f.buf.data();
    f.request = 0;
    f.discard = true;
  }
}

// The peer's socket is gone: orderly after a bye (or while this rank closes),
// else a failure.
void Engine::peer_gone(Peer& p, const std::string& why) {
  if (p.closed) return;
  p.closed = true;
  epoll_ctl(epoll_, EPOLL_CTL_DEL, p.link.fd.get(), nullptr);
  p.link.fd.reset();
  p.out.clear();
  const bool orderly = p.bye || stopping_;
  const std::string who = "rank " + std::to_string(p.link.rank) + " (" + p.link.address + ", pid " +
                          std::to_string(p.link.pid) + " on " + p.link.host + ")";
  if (!orderly) declare_locked("a peer failed: " + who + " " + why);
  const Status gone = orderly ? Status(Code::kShutdown, who + " has left (it shut down)") : failed_;
  for (auto& [id, r] : requests_)
    if (r.peer == p.link.rank && !r.done) complete(id, gone);
  cv_.notify_all();
}

void Engine::close_orderly() {
  std::unique_lock<std::mutex> lock(mu_);
  stopping_ = true;
  for (auto& slot : peers_) {
    if (!slot || slot->closed) continue;
    OutItem bye;
    encode_header(FrameHeader{FrameType::kBye, options_.rank, 0, options_.generation}, &bye.head);
    enqueue(*slot, std::move(bye));
  }
  const auto limit = failed_.ok() ? std::chrono::milliseconds(1000) : std::chrono::milliseconds(100);
  cv_.wait_for(lock, limit, [this] {
    for (auto& slot : peers_)
      if (slot && !slot->closed) return false;
    return true;
  });
  quit_ = true;
  lock.unlock();
  const uint64_t one = 1;
  if (write(wake_.get(), &one, sizeof one) < 0) {
    // The counter is full: a wake-up is pending anyway.
  }
  thread_.join();
}

}  // namespace kolo::socket
