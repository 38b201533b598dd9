// The engine's frames in and out (engine.h). Everything here runs with mu_ held,
// on the progress thread or on a caller that posted something.
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "transports/socket/engine.h"

#include "common/check.h"

namespace kolo::socket {
namespace {

constexpr size_t kMaxIov = 32;

}  // namespace

Engine::Peer* Engine::peer(int rank) {
  if (rank < 0 || rank >= options_.size) return nullptr;
  return peers_[static_cast<size_t>(rank)].get();
}

void Engine::complete(RequestId id, Status status) {
  auto it = requests_.find(id);
  if (it == requests_.end() || it->second.done) return;
  it->second.done = true;
  it->second.status = std::move(status);
  cv_.notify_all();
}

void Engine::enqueue(Peer& p, OutItem item) {
  if (p.closed) {
    if (item.request != 0) complete(item.request, failed_.ok() ? Status(Code::kShutdown, "rank " +
        std::to_string(p.link.rank) + " has left (it shut down)") : failed_);
    return;
  }
  const bool idle = p.out.empty();
  if (item.bulk || stopping_) {
    p.out.push_back(std::move(item));
  } else {  // Note [Small frames pass the data]
    auto at = p.out.begin();
    while (at != p.out.end() && (!at->bulk || at->written > 0)) ++at;
    p.out.insert(at, std::move(item));
  }
  if (idle) write_some(p);
}

// Note [Small frames pass the data]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Every frame but a data frame (a clear-to-send, an announcement, an eager or
// control message, a ring) is queued ahead of the data frames not yet begun,
// in the order queued among its kind. Behind them, a clear-to-send for the
// peer's message waited until this rank's own message had gone out whole, and
// two ranks exchanging large messages took turns on a full-duplex link: at
// 1 Gbit/s a 2-rank ring moved at half the link's rate (docs/socket-world.md).
// Data frames name their receive and offset, so the order between them and the
// rest does not matter; the others keep theirs, which matching relies on. A
// bye goes last (queued while stopping, Note [Closing in order]).


void Engine::arm_write(Peer& p, bool on) {
  if (p.write_armed == on || p.closed) return;
  epoll_event ev{};
  ev.events = on ? (EPOLLIN | EPOLLOUT) : EPOLLIN;
  ev.data.u64 = static_cast<uint64_t>(p.link.rank) + 1;
  epoll_ctl(epoll_, EPOLL_CTL_MOD, p.link.fd.get(), &ev);
  p.write_armed = on;
}

// Writes queued frames until the socket is full (then waits for EPOLLOUT) or
// the queue is empty. A frame written whole credits its request.
void Engine::write_some(Peer& p) {
  while (!p.out.empty() && !p.closed) {
    iovec iov[kMaxIov];
    size_t n_iov = 0;
    for (auto it = p.out.begin(); it != p.out.end() && n_iov + 2 <= kMaxIov; ++it) {
      size_t skip = it->written;
      if (skip < it->head.size()) {
        iov[n_iov++] = {it->head.data() + skip, it->head.size() - skip};
        skip = 0;
      } else {
        skip -= it->head.size();
      }
      if (it->body_bytes > skip)
        iov[n_iov++] = {const_cast<char*>(it->body_data()) + skip, it->body_bytes - skip};
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = n_iov;
    const ssize_t n = sendmsg(p.link.fd.get(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      arm_write(p, true);
      return;
    }
    if (n < 0) {
      peer_gone(p, std::string("broke the connection (") + std::strerror(errno) + ")");
      return;
    }
    p.sent = Clock::now();
    size_t left = static_cast<size_t>(n);
    while (left > 0 || (!p.out.empty() && p.out.front().head.size() + p.out.front().body_bytes ==
                                              p.out.front().written)) {
      OutItem& item = p.out.front();
      const size_t total = item.head.size() + item.body_bytes;
      const size_t take = std::min(left, total - item.written);
      item.written += take;
      left -= take;
      if (item.written < total) break;
      if (item.request != 0) {
        auto r = requests_.find(item.request);
        if (r != requests_.end()) {
          r->second.moved += item.body_bytes;
          if (r->second.moved >= r->second.bytes) complete(item.request, Status::OK());
        }
      }
      p.out.pop_front();
    }
  }
  if (p.closed) return;
  arm_write(p, false);
  if (stopping_ && !p.shut) {  // Note [Closing in order]
    shutdown(p.link.fd.get(), SHUT_WR);
    p.shut = true;
  }
}

// Reads what the socket has, frame stage by frame stage.
void Engine::read_some(Peer& p) {
  while (!p.closed) {
    InFrame& f = p.in;
    char* dst = nullptr;
    size_t want = 0;
    switch (f.stage) {
      case InFrame::kHeader: dst = f.header + f.got; want = kHeaderBytes - f.got; break;
      case InFrame::kPrefix: dst = f.prefix + f.got; want = prefix_bytes(f.h.type) - f.got; break;
      case InFrame::kBody: dst = f.dst + f.got; want = f.body_bytes - f.got; break;
    }
    const ssize_t n = recv(p.link.fd.get(), dst, want, MSG_DONTWAIT);
    if (n == 0) {
      peer_gone(p, "closed its connection without a goodbye (its process exited or was killed)");
      return;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n < 0) {
      peer_gone(p, std::string("broke the connection (") + std::strerror(errno) + ")");
      return;
    }
    p.heard = Clock::now();
    f.got += static_cast<size_t>(n);
    if (static_cast<size_t>(n) < want) continue;
    Status s;
    if (f.stage == InFrame::kHeader) {
      s = on_header(p);
    } else if (f.stage == InFrame::kPrefix) {
      s = on_prefix(p);
    } else {
      s = on_frame(p);
    }
    if (!s.ok()) {
      // The stream cannot be parsed past a bad frame: the peer has failed.
      declare_locked("a peer failed: rank " + std::to_string(p.link.rank) + " (" + p.link.address +
                     ") broke the protocol: " + s.message());
      peer_gone(p, "broke the protocol");
      return;
    }
  }
}

// The body goes into an owned buffer (or nowhere, for kDiscard); 0 bytes: done.
static void own_body(std::string& buf, char** dst, size_t bytes) {
  buf.assign(bytes, '\0');
  *dst = buf.data();
}

Status Engine::on_header(Peer& p) {
  InFrame& f = p.in;
  KOLO_RETURN_IF_ERROR_AS_IS(decode_header(f.header, kHeaderBytes, &f.h));
  if (f.h.sender != p.link.rank)
    return invalid_argument("a frame says it is from rank " + std::to_string(f.h.sender));
  if (f.h.generation != options_.generation)
    return invalid_argument("a frame of generation " + std::to_string(f.h.generation) +
                            " (this world is generation " + std::to_string(options_.generation) + ")");
  switch (f.h.type) {
    case FrameType::kHello: case FrameType::kReject: case FrameType::kStoreRequest:
    case FrameType::kStoreReply:
      return invalid_argument(std::string("a ") + frame_type_name(f.h.type) +
                              " frame after the handshake");
    default: break;
  }
  f.got = 0;
  f.request = 0;
  f.discard = false;
  if (prefix_bytes(f.h.type) > 0) {
    f.stage = InFrame::kPrefix;
    return Status::OK();
  }
  f.stage = InFrame::kBody;
  f.body_bytes = f.h.length;
  own_body(f.buf, &f.dst, f.body_bytes);
  return f.body_bytes == 0 ? on_frame(p) : Status::OK();
}

Status Engine::on_prefix(Peer& p) {
  InFrame& f = p.in;
  const size_t fixed = prefix_bytes(f.h.type);
  f.body_bytes = f.h.length - fixed;
  f.got = 0;
  f.stage = InFrame::kBody;
  own_body(f.buf, &f.dst, 0);
  switch (f.h.type) {
    case FrameType::kControl: {
      ControlPrefix c;
      KOLO_RETURN_IF_ERROR_AS_IS(decode_control_prefix(f.prefix, fixed, &c));
      f.channel = c.channel;
      f.key = c.key;
      own_body(f.buf, &f.dst, f.body_bytes);
      break;
    }
    case FrameType::kEager: {
      EagerPrefix e;
      KOLO_RETURN_IF_ERROR_AS_IS(decode_eager_prefix(f.prefix, fixed, &e));
      f.channel = e.channel;
      KOLO_RETURN_IF_ERROR_AS_IS(match_eager(p, e.channel, e.tag));
      break;
    }
    case FrameType::kData: {
      DataPrefix d;
      KOLO_RETURN_IF_ERROR_AS_IS(decode_data_prefix(f.prefix, fixed, &d));
      if (!failed_.ok()) {  // forget_callers: nothing goes into a caller's buffer now
        own_body(f.buf, &f.dst, f.body_bytes);
        f.discard = true;
        break;
      }
      auto it = requests_.find(static_cast<RequestId>(d.receive));
      if (it == requests_.end() || it->second.send || it->second.peer != p.link.rank ||
          it->second.done || d.offset > it->second.bytes ||
          f.body_bytes > it->second.bytes - d.offset)
        return invalid_argument("data for receive " + std::to_string(d.receive) + " at offset " +
                                std::to_string(d.offset) + " that this rank did not ask for");
      f.dst = it->second.data + d.offset;
      f.request = it->first;
      break;
    }
    default: break;  // kRing, kRts, kCts: all fixed
  }
  return f.body_bytes == 0 ? on_frame(p) : Status::OK();
}

// An eager message's body goes straight into the first posted receive that
// matches, else into an owned buffer (an unexpected message).
Status Engine::match_eager(Peer& p, uint32_t channel, int tag) {
  InFrame& f = p.in;
  bool refused = false;
  const RequestId id =
      failed_.ok() ? take_posted(MatchKey{channel, p.link.rank, tag}, f.body_bytes, &refused) : 0;
  if (id != 0) {
    f.dst = requests_[id].data;
    f.request = id;
    return Status::OK();
  }
  f.discard = refused;
  own_body(f.buf, &f.dst, f.body_bytes);
  return Status::OK();
}

Engine::RequestId Engine::take_posted(const MatchKey& key, size_t bytes, bool* refused) {
  *refused = false;
  auto posted = posted_.find(key);
  while (posted != posted_.end() && !posted->second.empty()) {
    const RequestId id = posted->second.front();
    posted->second.pop_front();
    auto it = requests_.find(id);
    if (it == requests_.end()) continue;  // abandoned after a failure
    if (it->second.bytes == bytes) return id;
    complete(id, invalid_argument("received " + std::to_string(bytes) + " bytes from rank " +
                                  std::to_string(std::get<1>(key)) + ", posted " +
                                  std::to_string(it->second.bytes)));
    *refused = true;
    return 0;
  }
  return 0;
}

Status Engine::on_frame(Peer& p) {
  InFrame& f = p.in;
  f.stage = InFrame::kHeader;
  f.got = 0;
  const size_t fixed = prefix_bytes(f.h.type);
  auto channel_closed = [this](uint32_t c) {
    return std::find(closed_channels_.begin(), closed_channels_.end(), c) != closed_channels_.end();
  };
  switch (f.h.type) {
    case FrameType::kHeartbeat: break;
    case FrameType::kBye: p.bye = true; break;
    case FrameType::kVerdict:
      declare_locked("rank " + std::to_string(p.link.rank) + " reports: " + f.buf);
      break;
    case FrameType::kRing: {
      RingMsg m;
      KOLO_RETURN_IF_ERROR_AS_IS(decode_ring(f.prefix, fixed, &m));
      if (channel_closed(m.channel)) break;
      Bell& bell = bells_[m.channel];
      bell.highest = bell.any ? std::max(bell.highest, m.cycle) : m.cycle;
      bell.any = true;
      if (bell.waker) bell.waker();
      cv_.notify_all();
      break;
    }
    case FrameType::kControl: {
      if (channel_closed(f.channel)) break;
      const auto key = std::make_tuple(f.channel, p.link.rank, f.key);
      if (!mailbox_.emplace(key, std::move(f.buf)).second)
        return invalid_argument("control message " + std::to_string(f.key) + " on channel " +
                                std::to_string(f.channel) + " twice");
      cv_.notify_all();
      break;
    }
    case FrameType::kEager:
      if (f.request != 0 || (!f.discard && failed_.ok() && !channel_closed(f.channel)))
        KOLO_RETURN_IF_ERROR_AS_IS(on_eager(p));
      break;
    case FrameType::kRts: {
      RtsMsg m;
      KOLO_RETURN_IF_ERROR_AS_IS(decode_rts(f.prefix, fixed, &m));
      if (failed_.ok() && !channel_closed(m.channel)) on_rts(p, m);
      break;
    }
    case FrameType::kCts: {
      CtsMsg m;
      KOLO_RETURN_IF_ERROR_AS_IS(decode_cts(f.prefix, fixed, &m));
      return start_data(p, m.message, static_cast<RequestId>(m.receive));
    }
    case FrameType::kData:
      if (auto it = requests_.find(f.request); f.request != 0 && it != requests_.end()) {
        it->second.moved += f.body_bytes;
        if (it->second.moved == it->second.bytes) complete(f.request, Status::OK());
      }
      break;
    default: break;
  }
  f.buf.clear();
  f.buf.shrink_to_fit();
  return Status::OK();
}

// An eager message is in: its receive completes, or it waits as unexpected.
Status Engine::on_eager(Peer& p) {
  InFrame& f = p.in;
  if (f.request != 0) {
    auto it = requests_.find(f.request);
    if (it != requests_.end()) it->second.moved = f.body_bytes;
    complete(f.request, Status::OK());
    return Status::OK();
  }
  EagerPrefix e;
  KOLO_RETURN_IF_ERROR_AS_IS(decode_eager_prefix(f.prefix, prefix_bytes(FrameType::kEager), &e));
  const MatchKey key{e.channel, p.link.rank, e.tag};
  // Note [A receive posted while its message was arriving]
  bool refused = false;
  if (const RequestId id = take_posted(key, f.buf.size(), &refused); id != 0) {
    Request& r = requests_[id];
    if (!f.buf.empty()) std::memcpy(r.data, f.buf.data(), f.buf.size());
    r.moved = f.buf.size();
    complete(id, Status::OK());
    return Status::OK();
  }
  if (refused) return Status::OK();
  Unexpected u;
  u.data = std::move(f.buf);
  unexpected_[key].push_back(std::move(u));
  return Status::OK();
}

// Note [A receive posted while its message was arriving]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// An eager message with no receive posted when its header came is read into a
// buffer of its own, and the engine's lock is let go between reads of its body;
// a receive posted meanwhile finds nothing among the unexpected messages and is
// queued as posted. So a finished body first looks for such a receive and only
// then waits as unexpected: otherwise the two never meet and the receiver waits
// for good (seen as a hang of the socket world's hierarchical transport, about one
// run in ten at 2 hosts x 2 ranks, whose cross-node ring sends eager messages
// while the receiver is busy in the node's step).

// A large message is announced: the first posted receive that matches asks for
// it; without one, the announcement waits as unexpected.
void Engine::on_rts(Peer& p, const RtsMsg& m) {
  auto posted = posted_.find(MatchKey{m.channel, p.link.rank, m.tag});
  while (posted != posted_.end() && !posted->second.empty()) {
    const RequestId id = posted->second.front();
    posted->second.pop_front();
    if (requests_.count(id) == 0) continue;  // abandoned after a failure
    accept_rts(p, m.message, m.bytes, id);
    return;
  }
  Unexpected u;
  u.rts = true;
  u.message = m.message;
  u.bytes = m.bytes;
  unexpected_[MatchKey{m.channel, p.link.rank, m.tag}].push_back(std::move(u));
}

// A posted receive `id` meets a large message announced by `p`: ask for its
// bytes, or refuse them (receive id 0) when the sizes differ.
void Engine::accept_rts(Peer& p, uint64_t message, uint64_t bytes, RequestId id) {
  Request& r = requests_[id];
  if (r.bytes != bytes) {
    complete(id, invalid_argument("received " + std::to_string(bytes) + " bytes from rank " +
                                  std::to_string(p.link.rank) + ", posted " +
                                  std::to_string(r.bytes)));
    id = 0;
  }
  OutItem cts;
  encode_header(FrameHeader{FrameType::kCts, options_.rank, static_cast<uint32_t>(prefix_bytes(FrameType::kCts)),
                            options_.generation}, &cts.head);
  cts.head += encode_cts(CtsMsg{message, static_cast<uint64_t>(id)});
  enqueue(p, std::move(cts));
}

// The receiver asked for message `message` (ours): its bytes go out in chunks,
// straight from the sender's buffer.
Status Engine::start_data(Peer& p, uint64_t message, RequestId receive) {
  auto it = announced_.find(message);
  if (it == announced_.end())
    return invalid_argument("a clear-to-send for message " + std::to_string(message) +
                            " that this rank did not announce");
  const RequestId send = it->second;
  announced_.erase(it);
  auto r = requests_.find(send);
  if (r == requests_.end()) return Status::OK();  // abandoned after a failure
  if (receive == 0) {
    complete(send, invalid_argument("rank " + std::to_string(p.link.rank) + " posted a receive of "
                                    "another size for this " + std::to_string(r->second.bytes) +
                                    "-byte message"));
    return Status::OK();
  }
  const size_t bytes = r->second.bytes;
  for (size_t offset = 0; offset < bytes; offset += kChunkBytes) {
    const size_t chunk = std::min(kChunkBytes, bytes - offset);
    OutItem data;
    encode_header(FrameHeader{FrameType::kData, options_.rank,
                              static_cast<uint32_t>(prefix_bytes(FrameType::kData) + chunk),
                              options_.generation}, &data.head);
    data.head += encode_data_prefix(DataPrefix{static_cast<uint64_t>(receive), offset});
    data.body = r->second.data + offset;
    data.body_bytes = chunk;
    data.request = send;
    data.bulk = true;
    enqueue(p, std::move(data));
  }
  return Status::OK();
}

}  // namespace kolo::socket
