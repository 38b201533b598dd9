#include "transports/socket/net.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "common/check.h"

namespace kolo::socket {
namespace {

std::string os_error(int err) { return std::strerror(err); }

int millis_left(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return static_cast<int>(std::clamp<int64_t>(left.count() + 1, 0, 1000));
}

// Waits until `fd` has `events` or the deadline passes: OK, or kTimeout.
Status wait_for(int fd, short events, Clock::time_point deadline, const std::string& what,
                const char* doing) {
  while (true) {
    if (Clock::now() >= deadline)
      return Status(Code::kTimeout, "timed out " + std::string(doing) + " " + what);
    pollfd p{fd, events, 0};
    const int n = poll(&p, 1, millis_left(deadline));
    if (n > 0) return Status::OK();
    if (n < 0 && errno != EINTR) return transport_error("poll on " + what + ": " + os_error(errno));
  }
}

}  // namespace

void Fd::reset(int fd) {
  if (fd_ >= 0) close(fd_);
  fd_ = fd;
}

std::string Endpoint::host() const {
  char text[INET6_ADDRSTRLEN] = "?";
  if (addr.ss_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&addr)->sin_addr, text, sizeof text);
  } else if (addr.ss_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&addr)->sin6_addr, text, sizeof text);
  }
  return text;
}

uint16_t Endpoint::port() const {
  if (addr.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&addr)->sin_port);
  if (addr.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(&addr)->sin6_port);
  return 0;
}

void Endpoint::set_port(uint16_t port) {
  if (addr.ss_family == AF_INET) reinterpret_cast<sockaddr_in*>(&addr)->sin_port = htons(port);
  if (addr.ss_family == AF_INET6) reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port = htons(port);
}

std::string Endpoint::to_string() const {
  const std::string h = host();
  return (addr.ss_family == AF_INET6 ? "[" + h + "]" : h) + ":" + std::to_string(port());
}

Status resolve(const std::string& host, uint16_t port, Endpoint* out) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = getaddrinfo(host.c_str(), nullptr, &hints, &found);
  if (rc != 0 || found == nullptr)
    return invalid_argument("cannot resolve host '" + host + "': " + gai_strerror(rc));
  const addrinfo* pick = found;
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    if (a->ai_family == AF_INET) {
      pick = a;
      break;
    }
  }
  Endpoint e;
  std::memcpy(&e.addr, pick->ai_addr, pick->ai_addrlen);
  e.length = pick->ai_addrlen;
  e.set_port(port);
  freeaddrinfo(found);
  *out = e;
  return Status::OK();
}

Status interface_address(const std::string& ifname, Endpoint* out) {
  ifaddrs* all = nullptr;
  if (getifaddrs(&all) != 0) return transport_error("getifaddrs: " + os_error(errno));
  const ifaddrs* v4 = nullptr;
  const ifaddrs* v6 = nullptr;
  std::vector<std::string> seen;
  std::string names;
  for (const ifaddrs* a = all; a != nullptr; a = a->ifa_next) {
    if (a->ifa_addr == nullptr) continue;
    const int family = a->ifa_addr->sa_family;
    if (family != AF_INET && family != AF_INET6) continue;
    if (std::find(seen.begin(), seen.end(), a->ifa_name) == seen.end()) {
      seen.push_back(a->ifa_name);
      names += (names.empty() ? "" : ", ") + seen.back();
    }
    if (ifname != a->ifa_name) continue;
    if (family == AF_INET && !v4) v4 = a;
    if (family == AF_INET6 && !v6) v6 = a;
  }
  const ifaddrs* pick = v4 ? v4 : v6;
  Status status;
  if (pick == nullptr) {
    status = invalid_argument("KOLO_SOCKET_IFNAME=\"" + ifname +
                              "\": no such interface with an IP address (interfaces: " + names + ")");
  } else {
    Endpoint e;
    e.length = pick->ifa_addr->sa_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    std::memcpy(&e.addr, pick->ifa_addr, e.length);
    e.set_port(0);
    *out = e;
  }
  freeifaddrs(all);
  return status;
}

Status listen_on(const Endpoint& where, Fd* out, Endpoint* bound, int backlog, int* bind_errno) {
  if (bind_errno) *bind_errno = 0;
  Fd fd(::socket(where.addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return transport_error("socket(): " + os_error(errno));
  const int one = 1;
  setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(fd.get(), reinterpret_cast<const sockaddr*>(&where.addr), where.length) != 0) {
    const int err = errno;
    if (bind_errno) *bind_errno = err;
    const std::string why = err == EADDRINUSE ? "address in use (another process listens there)"
                                              : os_error(err);
    return Status(err == EADDRINUSE ? Code::kInvalidArgument : Code::kTransport,
                  "cannot bind " + where.to_string() + ": " + why);
  }
  if (listen(fd.get(), backlog) != 0)
    return transport_error("cannot listen on " + where.to_string() + ": " + os_error(errno));
  KOLO_RETURN_IF_ERROR(local_endpoint(fd.get(), bound));
  *out = std::move(fd);
  return Status::OK();
}

Status set_nonblocking(int fd, bool on) {
  const int flags = fcntl(fd, F_GETFL, 0);
  if (flags < 0 || fcntl(fd, F_SETFL, on ? flags | O_NONBLOCK : flags & ~O_NONBLOCK) != 0)
    return transport_error("fcntl(O_NONBLOCK): " + os_error(errno));
  return Status::OK();
}

Status set_nodelay(int fd) {
  const int one = 1;
  if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0)
    return transport_error("setsockopt(TCP_NODELAY): " + os_error(errno));
  return Status::OK();
}

// One non-blocking connect attempt: OK, or the errno that ended it in *err.
static Status connect_once(const Endpoint& to, Clock::time_point deadline, const std::string& what,
                           Fd* out, int* err) {
  *err = 0;
  Fd fd(::socket(to.addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return transport_error("socket(): " + os_error(errno));
  KOLO_RETURN_IF_ERROR(set_nonblocking(fd.get(), true));
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&to.addr), to.length) != 0) {
    if (errno != EINPROGRESS) {
      *err = errno;
      return Status::OK();
    }
    KOLO_RETURN_IF_ERROR_AS_IS(wait_for(fd.get(), POLLOUT, deadline, what + " at " + to.to_string(),
                                        "connecting to"));
    socklen_t len = sizeof *err;
    getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, err, &len);
    if (*err != 0) return Status::OK();
  }
  KOLO_RETURN_IF_ERROR(set_nonblocking(fd.get(), false));
  KOLO_RETURN_IF_ERROR(set_nodelay(fd.get()));
  *out = std::move(fd);
  return Status::OK();
}

Status connect_to(const Endpoint& to, Clock::time_point deadline, const std::string& what, Fd* out,
                  std::optional<Clock::duration> refused_limit) {
  auto nap = std::chrono::milliseconds(10);
  const auto start = Clock::now();
  int err = 0;
  while (true) {
    KOLO_RETURN_IF_ERROR_AS_IS(connect_once(to, deadline, what, out, &err));
    if (err == 0) return Status::OK();
    if (err == ECONNREFUSED && refused_limit && Clock::now() - start >= *refused_limit) {
      return Status(Code::kRankFailed,
                    what + " at " + to.to_string() + " refused every connection for " +
                        seconds_text(Clock::now() - start) +
                        ": it listened there, and its process has exited since");
    }
    // Refused (nothing listens yet) or unreachable for now: try again until the deadline.
    const bool retry = err == ECONNREFUSED || err == ENETUNREACH || err == EHOSTUNREACH ||
                       err == ETIMEDOUT || err == ECONNRESET || err == EAGAIN;
    if (!retry || Clock::now() + nap >= deadline) {
      return Status(retry ? Code::kTimeout : Code::kTransport,
                    "cannot reach " + what + " at " + to.to_string() + ": " + os_error(err) +
                        (retry ? " (kept trying for " + seconds_text(Clock::now() - start) + ")"
                               : std::string()));
    }
    std::this_thread::sleep_for(nap);
    nap = std::min(nap * 2, std::chrono::milliseconds(500));
  }
}

Status local_endpoint(int fd, Endpoint* out) {
  Endpoint e;
  e.length = sizeof e.addr;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&e.addr), &e.length) != 0)
    return transport_error("getsockname: " + os_error(errno));
  *out = e;
  return Status::OK();
}

Status peer_endpoint(int fd, Endpoint* out) {
  Endpoint e;
  e.length = sizeof e.addr;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&e.addr), &e.length) != 0)
    return transport_error("getpeername: " + os_error(errno));
  *out = e;
  return Status::OK();
}

// What errno `err` of a failed send or recv says of the connection.
static ConnectionEnd end_of(int err) {
  return err == ECONNRESET || err == EPIPE ? ConnectionEnd::kReset : ConnectionEnd::kOpen;
}

Status write_all(int fd, const std::string& bytes, Clock::time_point deadline,
                 const std::string& what, ConnectionEnd* end) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::send(fd, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      KOLO_RETURN_IF_ERROR_AS_IS(wait_for(fd, POLLOUT, deadline, what, "writing to"));
      continue;
    }
    if (end != nullptr) *end = end_of(errno);
    return transport_error("writing to " + what + ": " + os_error(errno));
  }
  return Status::OK();
}

// Reads exactly n bytes.
static Status read_exact(int fd, char* into, size_t n, Clock::time_point deadline,
                         const std::string& what, ConnectionEnd* end) {
  size_t done = 0;
  while (done < n) {
    const ssize_t got = ::recv(fd, into + done, n - done, MSG_DONTWAIT);
    if (got > 0) {
      done += static_cast<size_t>(got);
      continue;
    }
    if (got == 0) {
      if (end != nullptr) *end = ConnectionEnd::kClosed;
      return transport_error(what + " closed the connection" +
                             (done > 0 ? " in the middle of a frame" : ""));
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      KOLO_RETURN_IF_ERROR_AS_IS(wait_for(fd, POLLIN, deadline, what, "waiting for an answer from"));
      continue;
    }
    if (end != nullptr) *end = end_of(errno);
    return transport_error("reading from " + what + ": " + os_error(errno));
  }
  return Status::OK();
}

Status read_frame(int fd, Clock::time_point deadline, const std::string& what, Frame* out,
                  size_t max_payload, ConnectionEnd* end) {
  if (end != nullptr) *end = ConnectionEnd::kOpen;
  char header[kHeaderBytes];
  KOLO_RETURN_IF_ERROR_AS_IS(read_exact(fd, header, kHeaderBytes, deadline, what, end));
  FrameHeader h;
  if (Status s = decode_header(header, kHeaderBytes, &h); !s.ok())
    return Status(s.code(), what + " sent " + s.message());
  if (h.length > max_payload)
    return invalid_argument(what + " sent a " + frame_type_name(h.type) + " frame of " +
                            std::to_string(h.length) + " bytes here (at most " +
                            std::to_string(max_payload) + ")");
  out->header = h;
  out->payload.assign(h.length, '\0');
  return read_exact(fd, out->payload.data(), h.length, deadline, what, end);
}

bool same_token(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "localhost";
  return name;
}

std::string seconds_text(Clock::duration d) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g s", std::chrono::duration<double>(d).count());
  return text;
}

}  // namespace kolo::socket
