// The store's server: one thread, poll() over the listening socket, a wake-up
// pipe and the connections. See tcp_store.h for the protocol and the rules for
// connections that have not said hello.
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#include "common/check.h"
#include "common/logging.h"
#include "transports/socket/tcp_store.h"

namespace kolo::socket {

struct TcpStoreServer::State {
  struct Conn {
    Fd fd;
    std::string from;
    bool authed = false;
    bool dead = false;
    Clock::time_point hello_by;
    std::string in;
    std::string out;
    bool parked = false;  // a wait is parked: later requests stay in `in`
    StoreRequest waiting;
  };

  Options options;
  Fd listener;
  Fd wake_read;
  Fd wake_write;
  std::atomic<bool> stop{false};
  std::map<std::string, std::string> data;
  std::vector<std::unique_ptr<Conn>> conns;

  void run();
  void accept_new();
  void read_from(Conn& c);
  static size_t read_cap(const Conn& c);
  void process(Conn& c);
  bool greet(Conn& c, const Frame& frame);
  void handle(Conn& c, const StoreRequest& q);
  void reply(Conn& c, StoreOp op, const StoreReply& r);
  void unpark_ready();
  bool all_present(const std::vector<std::string>& keys) const;
  void flush(Conn& c);
};

namespace {

bool parse_int(const std::string& text, int64_t* out) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size()) return false;
  *out = v;
  return true;
}

}  // namespace

void TcpStoreServer::State::run() {
  std::vector<pollfd> fds;
  while (!stop.load(std::memory_order_acquire)) {
    fds.clear();
    fds.push_back({listener.get(), POLLIN, 0});
    fds.push_back({wake_read.get(), POLLIN, 0});
    auto next_deadline = Clock::now() + std::chrono::seconds(1);
    for (const auto& c : conns) {
      short events = c->in.size() < read_cap(*c) ? POLLIN : 0;
      if (!c->out.empty()) events |= POLLOUT;
      fds.push_back({c->fd.get(), events, 0});
      if (!c->authed) next_deadline = std::min(next_deadline, c->hello_by);
    }
    const auto wait_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
        next_deadline - Clock::now()).count();
    const int n = poll(fds.data(), fds.size(), static_cast<int>(std::max<int64_t>(wait_ms, 0) + 1));
    if (n < 0 && errno != EINTR) break;
    if (fds[0].revents & POLLIN) accept_new();
    const size_t known = fds.size() - 2;  // accept_new() appends after these
    for (size_t i = 0; i < known; ++i) {
      Conn& c = *conns[i];
      if (fds[i + 2].revents & (POLLIN | POLLHUP | POLLERR)) read_from(c);
      if (!c.dead) process(c);
    }
    unpark_ready();
    const auto now = Clock::now();
    for (auto& c : conns) {
      if (!c->authed && now >= c->hello_by) {
        KOLO_LOG(kWarning) << "store: dropped a connection from " << c->from
                           << " that did not say hello in time";
        c->dead = true;
      }
      if (!c->dead) flush(*c);
    }
    conns.erase(std::remove_if(conns.begin(), conns.end(), [](const auto& c) { return c->dead; }),
                conns.end());
  }
}

void TcpStoreServer::State::accept_new() {
  while (true) {
    Endpoint from;
    from.length = sizeof from.addr;
    Fd fd(accept4(listener.get(), reinterpret_cast<sockaddr*>(&from.addr), &from.length,
                  SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!fd.valid()) return;
    size_t strangers = 0;
    for (const auto& c : conns) strangers += c->authed ? 0 : 1;
    if (strangers >= options.max_unauthenticated) {
      KOLO_LOG(kWarning) << "store: dropped a connection from " << from.to_string() << ": "
                         << strangers << " others have not said hello yet";
      continue;
    }
    set_nodelay(fd.get()).ignore();
    auto c = std::make_unique<Conn>();
    c->fd = std::move(fd);
    c->from = from.to_string();
    c->hello_by = Clock::now() + options.hello_limit;
    conns.push_back(std::move(c));
  }
}

void TcpStoreServer::State::read_from(Conn& c) {
  char buffer[64 << 10];
  const size_t cap = read_cap(c);
  while (c.in.size() < cap) {
    const size_t want = std::min(sizeof buffer, cap - c.in.size());
    const ssize_t got = recv(c.fd.get(), buffer, want, MSG_DONTWAIT);
    if (got > 0) {
      c.in.append(buffer, static_cast<size_t>(got));
      continue;
    }
    if (got < 0 && errno == EINTR) continue;
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    c.dead = true;  // closed or broken; a parked wait goes with it
    return;
  }
}

// Before hello, nothing beyond one hello frame is read (Note [The job token]);
// after, at most one request ahead of the one being served.
size_t TcpStoreServer::State::read_cap(const Conn& c) {
  return kHeaderBytes + max_payload(c.authed ? FrameType::kStoreRequest : FrameType::kHello);
}

void TcpStoreServer::State::process(Conn& c) {
  while (!c.dead && !c.parked && c.in.size() >= kHeaderBytes) {
    FrameHeader h;
    Status s = decode_header(c.in.data(), c.in.size(), &h);
    if (s.ok() && !c.authed && h.type != FrameType::kHello)
      s = invalid_argument(std::string("first frame is a ") + frame_type_name(h.type) + " frame");
    if (s.ok() && c.authed && h.type != FrameType::kStoreRequest)
      s = invalid_argument(std::string("a ") + frame_type_name(h.type) + " frame is no request");
    if (!s.ok()) {
      KOLO_LOG(kWarning) << "store: dropped the connection from " << c.from << ": " << s.message();
      c.dead = true;
      return;
    }
    if (c.in.size() < kHeaderBytes + h.length) return;  // the rest is still coming
    Frame frame;
    frame.header = h;
    frame.payload = c.in.substr(kHeaderBytes, h.length);
    c.in.erase(0, kHeaderBytes + h.length);
    if (!c.authed) {
      if (!greet(c, frame)) return;
      continue;
    }
    StoreRequest q;
    if (Status bad = decode_store_request(frame.payload, &q); !bad.ok()) {
      KOLO_LOG(kWarning) << "store: dropped the connection from " << c.from << ": " << bad.message();
      c.dead = true;
      return;
    }
    handle(c, q);
  }
}

bool TcpStoreServer::State::greet(Conn& c, const Frame& frame) {
  Hello hello;
  Status s = decode_hello(frame.payload, &hello);
  if (s.ok() && hello.role != Role::kStore) s = invalid_argument("not a store client");
  if (s.ok() && !same_token(hello.token, options.token)) s = invalid_argument("wrong job token");
  if (!s.ok()) {
    KOLO_LOG(kWarning) << "store: dropped the connection from " << c.from << ": " << s.message();
    c.dead = true;
    return false;
  }
  c.authed = true;
  Hello back;
  back.role = Role::kStore;
  back.token = options.token;
  back.pid = static_cast<int32_t>(getpid());
  back.host = host_name();
  c.out += encode_frame(FrameType::kHello, -1, frame.header.generation, encode_hello(back));
  return true;
}

bool TcpStoreServer::State::all_present(const std::vector<std::string>& keys) const {
  for (const std::string& k : keys)
    if (data.count(k) == 0) return false;
  return true;
}

void TcpStoreServer::State::handle(Conn& c, const StoreRequest& q) {
  StoreReply r;
  const std::string& key = q.keys.empty() ? std::string() : q.keys[0];
  switch (q.op) {
    case StoreOp::kSet: data[key] = q.value; break;
    case StoreOp::kGet: {
      auto it = data.find(key);
      if (it == data.end()) r.status = StoreStatus::kNotFound;
      else r.value = it->second;
      break;
    }
    case StoreOp::kWait:
      if (!all_present(q.keys)) {
        c.parked = true;
        c.waiting = q;
        return;
      }
      break;
    case StoreOp::kAdd: {
      int64_t old = 0;
      auto it = data.find(key);
      if (it != data.end() && !parse_int(it->second, &old)) {
        r.status = StoreStatus::kError;
        r.value = "add: key '" + key + "' holds a value that is not an integer";
      } else if (__builtin_add_overflow(old, q.delta, &r.number)) {
        r.status = StoreStatus::kError;
        r.value = "add: key '" + key + "' would overflow int64";
      } else {
        data[key] = std::to_string(r.number);
      }
      break;
    }
    case StoreOp::kCompareSet: {
      auto it = data.find(key);
      const bool match = it == data.end() ? q.expected.empty() : it->second == q.expected;
      if (match) data[key] = q.value;
      auto now = data.find(key);
      r.value = now == data.end() ? std::string() : now->second;
      break;
    }
    case StoreOp::kDeletePrefix: {
      auto it = data.lower_bound(key);
      while (it != data.end() && it->first.compare(0, key.size(), key) == 0) {
        it = data.erase(it);
        ++r.number;
      }
      break;
    }
  }
  reply(c, q.op, r);
}

void TcpStoreServer::State::reply(Conn& c, StoreOp op, const StoreReply& r) {
  c.out += encode_frame(FrameType::kStoreReply, -1, 0, encode_store_reply(op, r));
}

// A set, add or compare-and-set may have completed parked waits.
void TcpStoreServer::State::unpark_ready() {
  bool again = true;
  while (again) {
    again = false;
    for (auto& c : conns) {
      if (c->dead || !c->parked || !all_present(c->waiting.keys)) continue;
      c->parked = false;
      reply(*c, StoreOp::kWait, StoreReply{});
      process(*c);  // what it sent after the wait may set keys others wait for
      again = true;
    }
  }
}

void TcpStoreServer::State::flush(Conn& c) {
  while (!c.out.empty()) {
    const ssize_t n = send(c.fd.get(), c.out.data(), c.out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      c.out.erase(0, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    c.dead = true;
    return;
  }
}

Status TcpStoreServer::start(const Endpoint& where, Options options,
                             std::unique_ptr<TcpStoreServer>* out, int* bind_errno) {
  std::unique_ptr<TcpStoreServer> server(new TcpStoreServer());
  server->state_ = std::make_unique<State>();
  State& st = *server->state_;
  st.options = std::move(options);
  KOLO_RETURN_IF_ERROR_AS_IS(listen_on(where, &st.listener, &server->endpoint_, 128, bind_errno));
  KOLO_RETURN_IF_ERROR(set_nonblocking(st.listener.get(), true));
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC | O_NONBLOCK) != 0)
    return transport_error(std::string("pipe: ") + std::strerror(errno));
  st.wake_read.reset(pipe_fds[0]);
  st.wake_write.reset(pipe_fds[1]);
  State* raw = server->state_.get();
  server->thread_ = std::thread([raw] { raw->run(); });
  *out = std::move(server);
  return Status::OK();
}

TcpStoreServer::~TcpStoreServer() {
  if (thread_.joinable()) {
    state_->stop.store(true, std::memory_order_release);
    const char byte = 1;
    if (write(state_->wake_write.get(), &byte, 1) < 0) {
      // The pipe is full: a wake-up is pending anyway.
    }
    thread_.join();
  }
}

Status TcpStoreServer::shared(const Endpoint& where, const std::string& token, bool* started,
                              int* bind_errno) {
  *bind_errno = 0;
  static std::mutex mu;
  // Never destroyed: the servers run until the process exits.
  static auto* servers = new std::map<std::string, std::pair<std::string, std::unique_ptr<TcpStoreServer>>>();
  std::lock_guard<std::mutex> lock(mu);
  *started = false;
  auto it = servers->find(where.to_string());
  if (it != servers->end()) {
    if (!same_token(it->second.first, token))
      return invalid_argument("this process already serves a store at " + where.to_string() +
                              " for another job token");
    return Status::OK();
  }
  Options options;
  options.token = token;
  std::unique_ptr<TcpStoreServer> server;
  KOLO_RETURN_IF_ERROR_AS_IS(start(where, options, &server, bind_errno));
  (*servers)[where.to_string()] = {token, std::move(server)};
  *started = true;
  return Status::OK();
}

}  // namespace kolo::socket
