// TcpLiveness before its thread runs: the listening socket, and connect(), which
// makes one authenticated connection per pair of watched ranks. Also the socket
// helpers of tcp_liveness_link.h.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "transports/liveness/tcp_liveness.h"
#include "transports/liveness/tcp_liveness_link.h"

namespace kolo::liveness {
namespace {

// A dial that failed on every address is tried again after this long.
constexpr auto kRedial = std::chrono::milliseconds(50);

Status os_error(const std::string& what) {
  return transport_error("kolo's liveness channel: " + what + ": " + std::strerror(errno));
}

// An accepted connection that has not said who it is yet.
struct PendingHello {
  int fd = -1;
  std::string in;
};

}  // namespace

bool flush(int fd, std::string* out) {
  while (!out->empty()) {
    const ssize_t n = send(fd, out->data(), out->size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      out->erase(0, static_cast<size_t>(n));
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return true;
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      return false;
    }
  }
  return true;
}

ReadResult read_some(int fd, std::string* in) {
  char buffer[4096];
  for (;;) {
    const ssize_t n = recv(fd, buffer, sizeof buffer, MSG_DONTWAIT);
    if (n > 0) {
      in->append(buffer, static_cast<size_t>(n));
      return ReadResult::kData;
    }
    if (n == 0) return ReadResult::kEnd;
    if (errno == EINTR) continue;
    return errno == EAGAIN || errno == EWOULDBLOCK ? ReadResult::kWouldBlock : ReadResult::kError;
  }
}

void close_fd(int* fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

int tcp_socket() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

Status TcpLiveness::listen(Options options, std::unique_ptr<TcpLiveness>* out) {
  if (options.timeout.count() <= 0) return invalid_argument("peer timeout must be positive");
  std::unique_ptr<TcpLiveness> self(new TcpLiveness(std::move(options)));
  if (pipe2(self->wake_, O_CLOEXEC | O_NONBLOCK) != 0) return os_error("pipe2");
  self->listen_fd_ = tcp_socket();
  if (self->listen_fd_ < 0) return os_error("socket");
  sockaddr_in any{};
  any.sin_family = AF_INET;
  any.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t length = sizeof any;
  if (bind(self->listen_fd_, reinterpret_cast<sockaddr*>(&any), sizeof any) != 0)
    return os_error("bind");
  if (::listen(self->listen_fd_, SOMAXCONN) != 0) return os_error("listen");
  if (getsockname(self->listen_fd_, reinterpret_cast<sockaddr*>(&any), &length) != 0)
    return os_error("getsockname");
  char host[256] = "?";
  gethostname(host, sizeof host - 1);
  std::string name = host;
  std::replace(name.begin(), name.end(), '|', '_');
  std::vector<std::string> ipv4 = local_ipv4_addresses();
  name = name.substr(0, 64);
  while (format_address(name, ntohs(any.sin_port), ipv4).size() > kMaxAddress) ipv4.pop_back();
  self->address_ = format_address(name, ntohs(any.sin_port), ipv4);
  *out = std::move(self);
  return Status::OK();
}

// connect()'s state besides the links.
struct TcpLiveness::Dialing {
  std::vector<PendingHello> pending;                  // accepted, no hello yet
  std::vector<Clock::time_point> redial;         // by link: no dial before
};

Status TcpLiveness::connect(const std::vector<Peer>& peers) {
  const auto deadline = Clock::now() + options_.timeout;
  for (const Peer& peer : peers) {
    auto link = std::make_unique<Link>();
    link->rank = peer.rank;
    std::string why;
    if (peer.rank == options_.rank ||
        !parse_address(peer.address, &link->host, &link->port, &link->ipv4, &why)) {
      return internal_error("rank " + std::to_string(peer.rank) + "'s liveness address: " +
                            (why.empty() ? "names this rank" : why));
    }
    links_.push_back(std::move(link));
  }
  Dialing d;
  d.redial.resize(links_.size());
  while (Clock::now() < deadline &&
         !std::all_of(links_.begin(), links_.end(),
                      [](const auto& link) { return link->state == Link::State::kUp; })) {
    start_dials(&d);
    std::vector<pollfd> fds{pollfd{listen_fd_, POLLIN, 0}};
    for (auto& link : links_) {
      if (link->state == Link::State::kDialing) fds.push_back(pollfd{link->fd, POLLOUT, 0});
      if (link->state == Link::State::kAwaitAck) fds.push_back(pollfd{link->fd, POLLIN, 0});
    }
    for (auto& p : d.pending) fds.push_back(pollfd{p.fd, POLLIN, 0});
    poll(fds.data(), fds.size(), static_cast<int>(kRedial.count()));
    for (int fd; (fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0;) {
      const int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      d.pending.push_back(PendingHello{fd, ""});
    }
    answer_dials(&d);
    take_hellos(&d);
  }
  for (auto& p : d.pending) close_fd(&p.fd);
  close_fd(&listen_fd_);  // nobody else may connect from now on
  return finish_connect();
}

// Dials the peers above this rank that have no connection yet.
void TcpLiveness::start_dials(Dialing* d) {
  const auto now = Clock::now();
  for (size_t i = 0; i < links_.size(); ++i) {
    Link& link = *links_[i];
    if (link.rank < options_.rank || link.state != Link::State::kIdle || now < d->redial[i]) continue;
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(link.port);
    inet_pton(AF_INET, link.ipv4[link.next_ip].c_str(), &to.sin_addr);
    link.fd = tcp_socket();
    if (link.fd >= 0 &&
        (::connect(link.fd, reinterpret_cast<sockaddr*>(&to), sizeof to) == 0 || errno == EINPROGRESS)) {
      link.state = Link::State::kDialing;
      continue;
    }
    close_fd(&link.fd);
    if (++link.next_ip == link.ipv4.size()) {
      link.next_ip = 0;
      d->redial[i] = now + kRedial;
    }
  }
}

// Dials that connected (they send their hello) or failed, and the answers to the
// hellos: an ack from the rank dialed, with the token, or the next address.
void TcpLiveness::answer_dials(Dialing* d) {
  const uint32_t me = static_cast<uint32_t>(options_.rank);
  for (size_t i = 0; i < links_.size(); ++i) {
    Link& link = *links_[i];
    bool failed_dial = false;
    if (link.state == Link::State::kDialing) {
      pollfd p{link.fd, POLLOUT, 0};
      if (poll(&p, 1, 0) <= 0) continue;
      int error = 0;
      socklen_t size = sizeof error;
      getsockopt(link.fd, SOL_SOCKET, SO_ERROR, &error, &size);
      std::string out = encode(Frame{FrameType::kHello, me, static_cast<uint32_t>(link.rank),
                                     options_.token, ""});
      failed_dial = error != 0 || !flush(link.fd, &out) || !out.empty();
      if (!failed_dial) link.state = Link::State::kAwaitAck;
    } else if (link.state == Link::State::kAwaitAck) {
      const ReadResult r = read_some(link.fd, &link.in);
      Frame frame;
      size_t used = 0;
      std::string why;
      const Decoded got = decode(link.in.data(), link.in.size(), &frame, &used, &why);
      if (got == Decoded::kFrame && frame.type == FrameType::kHelloAck &&
          static_cast<int>(frame.from) == link.rank && frame.to == me &&
          frame.value == options_.token) {
        link.in.erase(0, used);
        link.state = Link::State::kUp;
      } else if (got != Decoded::kNeedMore || r == ReadResult::kEnd || r == ReadResult::kError) {
        failed_dial = true;  // not the rank it should be (another process, another job)
      }
    }
    if (!failed_dial) continue;
    close_fd(&link.fd);
    link.in.clear();
    link.state = Link::State::kIdle;
    if (++link.next_ip == link.ipv4.size()) {
      link.next_ip = 0;
      d->redial[i] = Clock::now() + kRedial;
    }
  }
}

// Hellos from the ranks below: the token and both ranks must be right, else the
// connection is closed unanswered.
void TcpLiveness::take_hellos(Dialing* d) {
  const uint32_t me = static_cast<uint32_t>(options_.rank);
  for (auto it = d->pending.begin(); it != d->pending.end();) {
    const ReadResult r = read_some(it->fd, &it->in);
    Frame frame;
    size_t used = 0;
    std::string why;
    const Decoded got = decode(it->in.data(), it->in.size(), &frame, &used, &why);
    if (got == Decoded::kNeedMore && r != ReadResult::kEnd && r != ReadResult::kError) {
      ++it;
      continue;
    }
    Link* from = nullptr;
    for (auto& link : links_)
      if (got == Decoded::kFrame && static_cast<int>(frame.from) == link->rank) from = link.get();
    if (from && frame.type == FrameType::kHello && frame.to == me && frame.value == options_.token &&
        from->rank < options_.rank && from->state != Link::State::kUp) {
      from->fd = it->fd;
      from->in = it->in.substr(used);
      from->out = encode(Frame{FrameType::kHelloAck, me, frame.from, options_.token, ""});
      flush(from->fd, &from->out);
      from->state = Link::State::kUp;
    } else {
      close_fd(&it->fd);
    }
    it = d->pending.erase(it);
  }
}

// Every link up: the thread starts. Otherwise the ranks not reached, named.
Status TcpLiveness::finish_connect() {
  std::string missing;
  for (auto& link : links_) {
    if (link->state == Link::State::kUp) continue;
    close_fd(&link->fd);
    missing += std::string(missing.empty() ? "" : ", ") + "rank " + std::to_string(link->rank) +
               " (on host " + link->host + ", port " + std::to_string(link->port) + ")";
  }
  if (!missing.empty()) {
    return Status(Code::kRankFailed,
                  "kolo_init: could not open kolo's liveness connections to " + missing +
                      " within KOLO_PEER_TIMEOUT_SECONDS (a rank died or hangs, or its "
                      "addresses cannot be reached from this host)");
  }
  const auto now = Clock::now();
  for (auto& link : links_) link->heard = now;
  last_look_ = now;
  last_look_ns_.store(
      std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count());
  if (!links_.empty()) thread_ = std::thread([this] { run(); });
  return Status::OK();
}

}  // namespace kolo::liveness
