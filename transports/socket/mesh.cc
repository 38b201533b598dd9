#include "transports/socket/mesh.h"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>

#include "common/check.h"
#include "common/logging.h"

namespace kolo::socket {
namespace {

std::string hello_frame(const MeshIdentity& me) {
  Hello h;
  h.role = Role::kPeer;
  h.token = me.token;
  h.size = me.size;
  h.pid = static_cast<int32_t>(getpid());
  h.host = me.host;
  return encode_frame(FrameType::kHello, me.rank, me.generation, encode_hello(h));
}

std::string reject_frame(const MeshIdentity& me, const std::string& why) {
  return encode_frame(FrameType::kReject, me.rank, me.generation, why.substr(0, kMaxReasonBytes));
}

// What differs between a peer's hello (and header) and this rank: empty if
// nothing. `expect` is the rank this end expects (-1: any above this rank).
std::string mismatch(const MeshIdentity& me, const FrameHeader& h, const Hello& hello, int expect) {
  const std::string who = "rank " + std::to_string(h.sender) + " (pid " +
                          std::to_string(hello.pid) + " on " + hello.host + ")";
  if (hello.size != me.size)
    return who + " has world size " + std::to_string(hello.size) + ", rank " +
           std::to_string(me.rank) + " has " + std::to_string(me.size) +
           " (WORLD_SIZE differs between the ranks)";
  if (h.generation != me.generation)
    return who + " is at generation " + std::to_string(h.generation) + ", rank " +
           std::to_string(me.rank) + " at " + std::to_string(me.generation);
  if (expect >= 0 ? h.sender != expect : (h.sender <= me.rank || h.sender >= me.size))
    return who + " is not a rank that connects to rank " + std::to_string(me.rank) +
           (expect >= 0 ? " at this address (expected rank " + std::to_string(expect) + ")"
                        : " (two ranks with one RANK?)");
  return {};
}

// One connection this rank accepted, until its hello is read.
struct Pending {
  Fd fd;
  std::string from;
  std::string in;
};

}  // namespace

// Note [A refused peer is gone]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A rank publishes its address only after it listens there, and keeps listening
// until its mesh is whole, which needs this rank. So a published address that
// refuses connections belongs to a process that has exited: after a second of
// refusals (a margin for the kernel, not for the peer) the dial fails with
// KOLO_ERR_RANK_FAILED. Waiting out KOLO_INIT_TIMEOUT_SECONDS instead held an
// elastic newcomer 300 s in kolo_init after the generation's rank 0 was killed.
constexpr auto kRefusedMeansGone = std::chrono::seconds(1);

// Note [A reset at the handshake is a death]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A rank that refuses a connector's token reads its hello and closes the
// connection in order; the connector's read then ends (the token message
// below). A connection reset instead (ECONNRESET, or EPIPE on the hello's
// write) is the kernel's answer for a process that is gone: its sockets are
// reset with the hello still unread. So it fails the dial with
// KOLO_ERR_RANK_FAILED, as a peer gone before the mesh formed does (Note [A
// refused peer is gone]), which an elastic worker answers by joining the next
// generation; as a transport error it ended the worker (a random-kill soak,
// tests/kolorun/elastic_world_test.py, killed a rank while a newcomer's hello
// was on its way to it).

// Connects to rank j and handshakes.
static Status connect_peer(const MeshIdentity& me, int j, const Endpoint& to,
                           Clock::time_point deadline, PeerLink* link) {
  const std::string what = "rank " + std::to_string(j);
  Fd fd;
  KOLO_RETURN_IF_ERROR_AS_IS(connect_to(to, deadline, what, &fd, kRefusedMeansGone));
  const std::string where = what + " at " + to.to_string();
  ConnectionEnd end = ConnectionEnd::kOpen;
  Status s = write_all(fd.get(), hello_frame(me), deadline, where, &end);
  Frame frame;
  if (s.ok())
    s = read_frame(fd.get(), deadline, where, &frame, max_payload(FrameType::kHello), &end);
  // Note [A reset at the handshake is a death]
  if (end == ConnectionEnd::kReset)
    return Status(Code::kRankFailed, where + " reset the connection at the handshake (" +
                                         s.message() + "): its process has exited or was killed");
  if (end == ConnectionEnd::kClosed)
    return transport_error(where + " closed the connection at the handshake: it refused this "
                           "rank's job token (KOLO_JOB_TOKEN differs between the ranks?)");
  KOLO_RETURN_IF_ERROR_AS_IS(s);
  if (frame.header.type == FrameType::kReject)
    return invalid_argument(where + " refused the connection: " + frame.payload);
  Hello hello;
  if (frame.header.type != FrameType::kHello)
    return transport_error(where + " answered with a " + frame_type_name(frame.header.type) + " frame");
  KOLO_RETURN_IF_ERROR_AS_IS(decode_hello(frame.payload, &hello));
  if (hello.role != Role::kPeer || !same_token(hello.token, me.token))
    return transport_error(where + " answered with another job token: a stranger listens there");
  const std::string differs = mismatch(me, frame.header, hello, j);
  if (!differs.empty()) return invalid_argument(differs);
  link->rank = j;
  link->fd = std::move(fd);
  link->address = to.to_string();
  link->host = hello.host;
  link->pid = hello.pid;
  return Status::OK();
}

// Reads what an accepted connection has sent; OK with *done when a hello is
// complete (*frame), OK and not done when more is to come, an error when the
// connection is to be dropped.
static Status read_hello(Pending& p, bool* done, Frame* frame) {
  *done = false;
  char buffer[1024];
  const size_t cap = kHeaderBytes + max_payload(FrameType::kHello);
  while (p.in.size() < cap) {
    const ssize_t n = recv(p.fd.get(), buffer, std::min(sizeof buffer, cap - p.in.size()), MSG_DONTWAIT);
    if (n > 0) {
      p.in.append(buffer, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    return transport_error("closed before saying hello");
  }
  if (p.in.size() < kHeaderBytes) return Status::OK();
  FrameHeader h;
  KOLO_RETURN_IF_ERROR_AS_IS(decode_header(p.in.data(), p.in.size(), &h));
  if (h.type != FrameType::kHello)
    return invalid_argument(std::string("opened with a ") + frame_type_name(h.type) + " frame");
  if (p.in.size() < kHeaderBytes + h.length) return Status::OK();
  KOLO_RETURN_IF_ERROR_AS_IS(decode_frame(p.in.substr(0, kHeaderBytes + h.length), frame));
  *done = true;
  return Status::OK();
}

// One accepted connection has spoken: *done when it is settled (a link made,
// or dropped: `dropped` says why, for the timeout's message); an error fails
// this rank (a peer of this job that does not fit it).
static Status take_hello(const MeshIdentity& me, Pending& p, Clock::time_point deadline,
                         std::map<int, PeerLink>* links, std::string* dropped, bool* done) {
  Frame frame;
  Status s = read_hello(p, done, &frame);
  Hello hello;
  if (s.ok() && *done) s = decode_hello(frame.payload, &hello);
  if (s.ok() && *done && (hello.role != Role::kPeer || !same_token(hello.token, me.token)))
    s = invalid_argument("wrong job token");
  if (!s.ok()) {  // Note [The job token]: dropped without a word
    KOLO_LOG(kWarning) << "dropped a connection from " << p.from << ": " << s.message();
    *dropped = " (dropped a connection from " + p.from + ": " + s.message() + ")";
    *done = true;
    return Status::OK();
  }
  if (!*done) return Status::OK();
  std::string differs = mismatch(me, frame.header, hello, -1);
  if (differs.empty() && links->count(frame.header.sender))
    differs = "rank " + std::to_string(frame.header.sender) + " connected twice";
  if (!differs.empty()) {
    write_all(p.fd.get(), reject_frame(me, differs), Clock::now() + std::chrono::seconds(1),
              p.from).ignore();
    return invalid_argument(differs);
  }
  KOLO_RETURN_IF_ERROR_AS_IS(
      write_all(p.fd.get(), hello_frame(me), deadline, "rank " + std::to_string(frame.header.sender)));
  PeerLink& link = (*links)[frame.header.sender];
  link.rank = frame.header.sender;
  link.address = p.from;
  link.host = hello.host;
  link.pid = hello.pid;
  link.fd = std::move(p.fd);
  return Status::OK();
}

// Accepts until every rank above this one has connected.
static Status accept_peers(const MeshIdentity& me, const Fd& listener, Clock::time_point deadline,
                           std::map<int, PeerLink>* links) {
  std::vector<Pending> pending;
  std::string dropped;  // for the timeout's message
  // Those below this rank are in `links` already.
  while (static_cast<int>(links->size()) < me.size - 1) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      std::string missing;
      for (int k = me.rank + 1; k < me.size; ++k)
        if (!links->count(k)) missing += (missing.empty() ? "" : ", ") + std::to_string(k);
      return Status(Code::kTimeout, "rank " + std::to_string(me.rank) +
                                        " timed out waiting for ranks " + missing +
                                        " to connect" + dropped);
    }
    std::vector<pollfd> fds{{listener.get(), POLLIN, 0}};
    for (const Pending& p : pending) fds.push_back({p.fd.get(), POLLIN, 0});
    poll(fds.data(), fds.size(), static_cast<int>(std::min<int64_t>(left.count() + 1, 500)));
    for (size_t i = pending.size(); i-- > 0;) {
      if (!(fds[i + 1].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      bool done = false;
      KOLO_RETURN_IF_ERROR_AS_IS(take_hello(me, pending[i], deadline, links, &dropped, &done));
      if (done) pending.erase(pending.begin() + static_cast<long>(i));
    }
    if (fds[0].revents & POLLIN) {
      Endpoint from;
      from.length = sizeof from.addr;
      Fd fd(accept4(listener.get(), reinterpret_cast<sockaddr*>(&from.addr), &from.length,
                    SOCK_NONBLOCK | SOCK_CLOEXEC));
      if (fd.valid() && pending.size() < 256) {
        set_nodelay(fd.get()).ignore();
        pending.push_back(Pending{std::move(fd), from.to_string(), {}});
      }
    }
  }
  return Status::OK();
}

Status form_mesh(const MeshIdentity& me, const Fd& listener, const std::vector<Endpoint>& endpoints,
                 Clock::time_point deadline, std::vector<PeerLink>* links) {
  if (static_cast<int>(endpoints.size()) != me.size)
    return internal_error("form_mesh: " + std::to_string(endpoints.size()) + " endpoints for " +
                          std::to_string(me.size) + " ranks");
  KOLO_RETURN_IF_ERROR(set_nonblocking(listener.get(), true));
  std::map<int, PeerLink> by_rank;
  for (int j = 0; j < me.rank; ++j)
    KOLO_RETURN_IF_ERROR_AS_IS(connect_peer(me, j, endpoints[j], deadline, &by_rank[j]));
  KOLO_RETURN_IF_ERROR_AS_IS(accept_peers(me, listener, deadline, &by_rank));
  links->clear();
  for (auto& [rank, link] : by_rank) {
    link.same_host = link.host == me.host;
    links->push_back(std::move(link));
  }
  return Status::OK();
}

}  // namespace kolo::socket
