// Sockets for the socket world: addresses, listening, connecting and whole-frame
// I/O with deadlines. Every error names the address it concerns and what the
// system said (strerror), so that "the store is unreachable" says which store.
//
// Blocking helpers here run on one thread (kolo_init's, the store's) and never
// wait past their deadline; the progress engine (engine.h) does its own
// non-blocking I/O on the fds these produce.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "common/status.h"
#include "transports/socket/frame.h"

namespace kolo::socket {

using Clock = std::chrono::steady_clock;

// An owned file descriptor.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(o.release()) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) reset(o.release());
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

// An IPv4 or IPv6 address and port.
struct Endpoint {
  sockaddr_storage addr{};
  socklen_t length = 0;
  std::string to_string() const;  // "10.0.0.1:29500", "[fe80::1]:29500"
  std::string host() const;       // the address alone, numeric
  uint16_t port() const;
  void set_port(uint16_t port);
};

// Resolves `host` (a name or a numeric address) and `port`; the first address
// getaddrinfo gives (IPv4 first when both exist).
Status resolve(const std::string& host, uint16_t port, Endpoint* out);

// The address of interface `ifname` (IPv4 preferred), with port 0. An error
// names the interfaces that exist when there is no such one.
Status interface_address(const std::string& ifname, Endpoint* out);

// A listening socket bound to `where` (port 0: the system picks; *bound gets the
// port it has). SO_REUSEADDR, so a port in TIME_WAIT can be bound again, but a
// port another socket listens on fails: "address in use" naming it. *bind_errno
// (if given) gets bind()'s errno when binding failed, else 0.
Status listen_on(const Endpoint& where, Fd* out, Endpoint* bound, int backlog = 128,
                 int* bind_errno = nullptr);

// Connects to `to` within `deadline`, retrying while the connection is refused
// (the other side may not listen yet); an error names `to` and `what` ("the
// store", "rank 3"). The socket comes back blocking, with TCP_NODELAY. With
// `refused_limit`, refusals for that long fail with KOLO_ERR_RANK_FAILED: for an
// address a process published only once it listened there (Note [A refused
// peer is gone], mesh.cc).
Status connect_to(const Endpoint& to, Clock::time_point deadline, const std::string& what, Fd* out,
                  std::optional<Clock::duration> refused_limit = std::nullopt);

// The local address of a connected socket (the interface that reaches its peer).
Status local_endpoint(int fd, Endpoint* out);
Status peer_endpoint(int fd, Endpoint* out);

Status set_nonblocking(int fd, bool on);
Status set_nodelay(int fd);

// How a write_all() or read_frame() that failed found its connection: closed
// by the peer in order (it read what came and shut the connection), reset
// (ECONNRESET or EPIPE: the peer's process is gone, or it dropped the
// connection without reading it), or neither (a timeout, a bad frame).
enum class ConnectionEnd { kOpen, kClosed, kReset };

// Writes all of `bytes` before `deadline` (poll + send, MSG_NOSIGNAL). `end`
// (optional) says how a failed write found the connection.
Status write_all(int fd, const std::string& bytes, Clock::time_point deadline,
                 const std::string& what, ConnectionEnd* end = nullptr);
// Reads one whole frame before `deadline`. A malformed header, a payload above
// `max_payload`, a closed connection or the deadline is an error naming `what`;
// `end` (optional) as for write_all().
Status read_frame(int fd, Clock::time_point deadline, const std::string& what, Frame* out,
                  size_t max_payload, ConnectionEnd* end = nullptr);

// Whether two tokens are equal, in time independent of where they differ.
bool same_token(const std::string& a, const std::string& b);

// This host's name (gethostname).
std::string host_name();

// Seconds with up to three decimals, for messages: "2.5 s".
std::string seconds_text(Clock::duration d);

}  // namespace kolo::socket
