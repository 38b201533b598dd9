// The rendezvous store over TCP: a server (a thread that rank 0 or a launcher
// runs) and the client every rank uses. The protocol is frames (frame.h): a
// connection opens with a Hello of role kStore carrying the job token, both
// ways; then the client sends store requests and reads one reply to each.
//
// The server drops a connection whose first frame is not a Hello with the
// right token before reading or answering anything else (Note [The job token]
// in frame.h); it never writes to it. A connection that has not said hello
// within the hello limit is dropped too, so a silent stranger cannot hold a
// slot. A wait is parked on the server until its keys exist; the client bounds
// it by its own deadline and, on timeout, closes the connection (the server then
// forgets the wait) and reconnects on its next call.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "common/status.h"
#include "transports/socket/net.h"
#include "transports/socket/store.h"

namespace kolo::socket {

class TcpStoreServer {
 public:
  struct Options {
    std::string token;
    // How long a new connection may take to say hello before it is dropped.
    std::chrono::milliseconds hello_limit{10000};
    // At most this many connections that have not said hello yet.
    size_t max_unauthenticated = 64;
  };
  // Binds `where` (port 0: any) and starts serving on a thread of its own.
  static Status start(const Endpoint& where, Options options, std::unique_ptr<TcpStoreServer>* out,
                      int* bind_errno = nullptr);
  // Stops the thread and closes every connection.
  ~TcpStoreServer();
  const Endpoint& endpoint() const { return endpoint_; }

  // A server for `where` that lives until the process exits, shared by every
  // kolo_init of this process that asks for the same address and token (rank
  // 0 serves the store once, however often kolo is initialised). *started says
  // whether this call bound it. When binding fails, *bind_errno says why
  // (EADDRINUSE: something else listens there; EADDRNOTAVAIL: not this host's
  // address), for the caller to interpret.
  static Status shared(const Endpoint& where, const std::string& token, bool* started,
                       int* bind_errno);

 private:
  struct State;
  TcpStoreServer() = default;

  Endpoint endpoint_;
  std::unique_ptr<State> state_;
  std::thread thread_;
};

class TcpStore : public Store {
 public:
  // Connects to `server` (retrying while refused, up to `timeout`) and says
  // hello as `rank` (-1: none) of `generation`. `timeout` also bounds every
  // later call but wait() and get(), which take their own.
  static Status connect(const Endpoint& server, std::string token, int32_t rank,
                        uint64_t generation, std::chrono::milliseconds timeout,
                        std::unique_ptr<TcpStore>* out);

  Status set(const std::string& key, const std::string& value) override;
  Status try_get(const std::string& key, std::string* value, bool* found) override;
  Status wait(const std::vector<std::string>& keys, Duration timeout) override;
  Status add(const std::string& key, int64_t delta, int64_t* value) override;
  Status compare_and_set(const std::string& key, const std::string& expected,
                         const std::string& desired, std::string* current) override;
  Status delete_prefix(const std::string& prefix, int64_t* removed) override;
  std::string describe() const override { return "the store at " + server_.to_string(); }

  // This end of the connection: the interface that reaches the store.
  const Endpoint& local() const { return local_; }

 private:
  TcpStore(const Endpoint& server, std::string token, int32_t rank, uint64_t generation,
           std::chrono::milliseconds timeout)
      : server_(server), token_(std::move(token)), rank_(rank), generation_(generation),
        timeout_(timeout) {}
  Status open(Clock::time_point deadline);
  Status call(const StoreRequest& request, Clock::time_point deadline, StoreReply* reply);

  Endpoint server_;
  std::string token_;
  int32_t rank_;
  uint64_t generation_;
  std::chrono::milliseconds timeout_;
  Fd fd_;
  Endpoint local_;
};

}  // namespace kolo::socket
