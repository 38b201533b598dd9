// TcpLiveness after connect(): the thread that beats and listens, the verdicts,
// the notices, and the goodbye. (Opening the connections: tcp_liveness_connect.cc.)
#include "transports/liveness/tcp_liveness.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>

#include "transports/liveness/tcp_liveness_link.h"

namespace kolo::liveness {
namespace {

// Beats wait behind this much unsent data no longer: a peer that does not read
// (a partition) must not make this process buffer without bound.
constexpr size_t kMaxQueued = 4096;
// How long the destructor waits for its peers to answer its goodbye.
constexpr auto kGoodbyeWait = std::chrono::milliseconds(200);

std::chrono::milliseconds interval_for(std::chrono::milliseconds timeout) {
  return std::max(std::chrono::milliseconds(10), timeout / 5);
}

int64_t to_ns(TcpLiveness::Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

std::string seconds(double s) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g s", s);
  return text;
}

}  // namespace

TcpLiveness::TcpLiveness(Options options)
    : options_(std::move(options)), interval_(interval_for(options_.timeout)) {}

TcpLiveness::~TcpLiveness() {
  if (thread_.joinable()) {
    stopping_.store(true, std::memory_order_release);
    const char byte = 1;
    if (write(wake_[1], &byte, 1) < 0) {
    }  // the thread also wakes every interval
    thread_.join();
  }
  // Goodbye: Bye, then our end of the stream, then read until the peer's end (or
  // kGoodbyeWait), so that the Bye is read before the connection closes. After a
  // verdict there is no goodbye: the peers see the connections close, a failure.
  const bool goodbye = !failed();
  const auto until = Clock::now() + kGoodbyeWait;
  for (auto& link : links_) {
    if (link->fd < 0 || link->closed || !goodbye) continue;
    link->out += encode(Frame{FrameType::kBye, static_cast<uint32_t>(options_.rank),
                              static_cast<uint32_t>(link->rank), 0, ""});
    if (flush(link->fd, &link->out) && link->out.empty()) shutdown(link->fd, SHUT_WR);
  }
  for (auto& link : links_) {
    while (goodbye && link->fd >= 0 && !link->closed && link->out.empty() && Clock::now() < until) {
      pollfd p{link->fd, POLLIN, 0};
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now());
      if (poll(&p, 1, static_cast<int>(std::max<int64_t>(1, left.count()))) <= 0) break;
      std::string ignored;
      const ReadResult r = read_some(link->fd, &ignored);
      if (r == ReadResult::kEnd || r == ReadResult::kError) break;
    }
    close_fd(&link->fd);
  }
  close_fd(&listen_fd_);
  close_fd(&wake_[0]);
  close_fd(&wake_[1]);
}

Status TcpLiveness::check() {
  if (failed()) return verdict_;  // written once, before failed_ (release)
  // Note [Silence is counted only while this process listens]: if the thread has
  // not looked lately (stopped with the process, or starved), look now.
  const auto now = Clock::now();
  const int64_t stale = std::chrono::nanoseconds(interval_).count() * 2;
  if (to_ns(now) - last_look_ns_.load(std::memory_order_acquire) > stale) {
    std::lock_guard<std::mutex> lock(mu_);
    look(now, true);
  }
  return failed() ? verdict_ : Status::OK();
}

Status TcpLiveness::check_now() {
  if (failed()) return verdict_;
  {
    std::lock_guard<std::mutex> lock(mu_);
    look(Clock::now(), true);
  }
  return failed() ? verdict_ : Status::OK();
}

void TcpLiveness::declare(const Status& verdict) {
  std::lock_guard<std::mutex> lock(mu_);
  reach_verdict(verdict);
}

void TcpLiveness::run() {
  std::vector<pollfd> fds;
  while (!stopping_.load(std::memory_order_acquire)) {
    fds.clear();
    fds.push_back(pollfd{wake_[0], POLLIN, 0});
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& link : links_)
        if (link->fd >= 0 && !link->closed)
          fds.push_back(pollfd{link->fd, static_cast<short>(POLLIN | (link->out.empty() ? 0 : POLLOUT)), 0});
    }
    const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(interval_);
    poll(fds.data(), fds.size(), static_cast<int>(wait.count()));
    if (stopping_.load(std::memory_order_acquire)) break;
    std::lock_guard<std::mutex> lock(mu_);
    look(Clock::now(), true);
  }
}

void TcpLiveness::look(Clock::time_point now, bool poll_first) {
  // Note [Silence is counted only while this process listens].
  if (last_look_ != Clock::time_point{} && now - last_look_ > 2 * interval_ + std::chrono::milliseconds(50)) {
    for (auto& link : links_) link->heard = std::max(link->heard, now);
  }
  if (poll_first) {
    std::vector<pollfd> fds;
    std::vector<Link*> which;
    for (auto& link : links_) {
      if (link->fd < 0 || link->closed) continue;
      fds.push_back(pollfd{link->fd, static_cast<short>(POLLIN | (link->out.empty() ? 0 : POLLOUT)), 0});
      which.push_back(link.get());
    }
    if (!fds.empty() && poll(fds.data(), fds.size(), 0) > 0) {
      for (size_t i = 0; i < fds.size(); ++i) {
        if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) read_link(*which[i], now);
        if ((fds[i].revents & POLLOUT) && !which[i]->closed && !flush(which[i]->fd, &which[i]->out)) {
          which[i]->closed = true;
          which[i]->closed_why = "its liveness connection failed";
        }
      }
    }
  }
  last_look_ = now;
  last_look_ns_.store(to_ns(now), std::memory_order_release);
  beat(now);
  judge(now);
}

void TcpLiveness::read_link(Link& link, Clock::time_point now) {
  ReadResult r;
  while ((r = read_some(link.fd, &link.in)) == ReadResult::kData) {
  }
  size_t at = 0;
  for (;;) {
    Frame frame;
    size_t used = 0;
    std::string why;
    const Decoded d = decode(link.in.data() + at, link.in.size() - at, &frame, &used, &why);
    if (d == Decoded::kNeedMore) break;
    if (d == Decoded::kBad || static_cast<int>(frame.from) != link.rank) {
      link.closed = true;
      link.closed_why = "sent a malformed liveness frame (" +
                        (d == Decoded::kBad ? why : "from rank " + std::to_string(frame.from)) + ")";
      return;
    }
    at += used;
    link.heard = now;
    if (frame.type == FrameType::kBye) link.departed = true;
    if (frame.type == FrameType::kBye && link.out.empty()) shutdown(link.fd, SHUT_WR);
    if (frame.type == FrameType::kNotice)
      reach_verdict(Status(Code::kRankFailed, who(link) + " reports: " + frame.text));
  }
  link.in.erase(0, at);
  if (r == ReadResult::kEnd || r == ReadResult::kError) {
    link.closed = true;
    if (link.closed_why.empty())
      link.closed_why = r == ReadResult::kEnd ? "has exited (its liveness connection closed)"
                                              : "has exited (its liveness connection was reset)";
  }
}

void TcpLiveness::beat(Clock::time_point now) {
  if (now < next_beat_) return;
  next_beat_ = now + interval_;
  ++beats_;
  for (auto& link : links_) {
    if (link->fd < 0 || link->closed || link->departed || link->out.size() > kMaxQueued) continue;
    link->out += encode(Frame{FrameType::kBeat, static_cast<uint32_t>(options_.rank),
                              static_cast<uint32_t>(link->rank), beats_, ""});
    if (!flush(link->fd, &link->out)) {
      link->closed = true;
      link->closed_why = "has exited (its liveness connection failed)";
    }
  }
}

void TcpLiveness::judge(Clock::time_point now) {
  if (failed()) return;
  std::vector<std::string> why;
  for (auto& link : links_) {
    if (link->departed) continue;  // said goodbye: not watched any more
    if (link->closed) {
      why.push_back(who(*link) + " " + link->closed_why);
    } else if (now - link->heard > options_.timeout) {
      const double silent = std::chrono::duration<double>(now - link->heard).count();
      why.push_back(who(*link) + " has not been heard from for " + seconds(silent) +
                    " (KOLO_PEER_TIMEOUT_SECONDS is " +
                    seconds(std::chrono::duration<double>(options_.timeout).count()) + ")");
    }
  }
  if (why.empty()) return;
  std::string message = why.size() == 1 ? "a peer failed: " : "peers failed: ";
  for (size_t i = 0; i < why.size(); ++i) message += (i ? "; " : "") + why[i];
  reach_verdict(Status(Code::kRankFailed, message));
}

// Under mu_. The notice goes to every peer still connected, whatever it did.
void TcpLiveness::reach_verdict(const Status& verdict) {
  if (failed()) return;
  verdict_ = verdict;
  failed_.store(true, std::memory_order_release);
  for (auto& link : links_) {
    if (link->fd < 0 || link->closed) continue;
    link->out += encode(Frame{FrameType::kNotice, static_cast<uint32_t>(options_.rank),
                              static_cast<uint32_t>(link->rank), 0, verdict.message()});
    flush(link->fd, &link->out);
  }
  if (options_.on_verdict) options_.on_verdict();
}

std::string TcpLiveness::who(const Link& link) const {
  return "rank " + std::to_string(link.rank) + " (on host " + link.host + ")";
}

}  // namespace kolo::liveness
