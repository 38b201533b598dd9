// Socket worlds for tests: a store served by the test, and `size` ranks that
// each create their world (transports/socket/socket_world.h) on a thread of
// their own, then run a body on it.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "src/common/check.h"
#include "transports/socket/socket_world.h"
#include "transports/socket/tcp_store.h"

namespace kolo::socket::testing {

// Where the store is served: on a thread of the test, or in a process of its
// own for tests that fork ranks. A child forked while another thread holds a
// lock inherits it held for good: the store's thread, allocating as it serves
// a rank forked earlier, can leave the next child hung in the sanitizers'
// allocator (seen under AddressSanitizer: a rank silent from its first
// heartbeat on).
enum class StoreIn { kThread, kProcess };

class SocketJob {
 public:
  explicit SocketJob(StoreIn where = StoreIn::kThread) {
    if (where == StoreIn::kThread) {
      Status s = serve(&server_);
      EXPECT_TRUE(s.ok()) << s.to_string();
      if (server_) store_ = server_->endpoint();
      return;
    }
    int up[2], down[2];
    EXPECT_EQ(pipe(up), 0);
    EXPECT_EQ(pipe(down), 0);
    store_pid_ = fork();
    if (store_pid_ == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      close(up[0]);
      close(down[1]);
      std::unique_ptr<TcpStoreServer> server;
      const int port = serve(&server).ok() ? server->endpoint().port() : 0;
      if (write(up[1], &port, sizeof port) != sizeof port) _exit(2);
      char byte;
      while (read(down[0], &byte, 1) > 0) {
      }  // serves until the test closes its end
      _exit(0);
    }
    close(up[1]);
    close(down[0]);
    store_link_ = down[1];
    int port = 0;
    EXPECT_EQ(read(up[0], &port, sizeof port), static_cast<ssize_t>(sizeof port));
    close(up[0]);
    EXPECT_NE(port, 0) << "the store's process could not serve";
    EXPECT_TRUE(resolve("127.0.0.1", port, &store_).ok());
  }

  ~SocketJob() {
    if (store_pid_ <= 0) return;
    close(store_link_);
    waitpid(store_pid_, nullptr, 0);
  }

  // The options rank `rank` of `size` starts from.
  SocketWorldOptions options(int rank, int size) const {
    SocketWorldOptions o;
    o.store_host = "127.0.0.1";
    o.store_port = store_.port();
    o.serve_store = false;
    o.rank = rank;
    o.size = size;
    o.token = "test-token";
    o.init_timeout = std::chrono::milliseconds(20000);
    o.peer_timeout = std::chrono::milliseconds(10000);
    return o;
  }

  // Every rank creates its world from options(rank, size) as `adjust` changes
  // them, then runs body(rank, status of create_world, world).
  void run(int size, const std::function<void(int, SocketWorldOptions*)>& adjust,
           const std::function<void(int, const Status&, transport::World&)>& body) {
    std::vector<std::thread> ranks;
    for (int r = 0; r < size; ++r) {
      ranks.emplace_back([&, r] {
        SocketWorldOptions o = options(r, size);
        if (adjust) adjust(r, &o);
        transport::World world;
        Status s = create_world(o, &world);
        body(r, s, world);
      });
    }
    for (std::thread& t : ranks) t.join();
  }

  // As run(), for bodies that need a world: creation must succeed.
  void run_ok(int size, const std::function<void(int, transport::World&)>& body) {
    run(size, nullptr, [&](int r, const Status& s, transport::World& w) {
      ASSERT_TRUE(s.ok()) << "rank " << r << ": " << s.to_string();
      body(r, w);
    });
  }

  const Endpoint& store() const { return store_; }

 private:
  static Status serve(std::unique_ptr<TcpStoreServer>* server) {
    Endpoint where;
    KOLO_RETURN_IF_ERROR(resolve("127.0.0.1", 0, &where));
    TcpStoreServer::Options options;
    options.token = "test-token";
    return TcpStoreServer::start(where, options, server);
  }

  std::unique_ptr<TcpStoreServer> server_;  // StoreIn::kThread
  pid_t store_pid_ = -1;                    // StoreIn::kProcess
  int store_link_ = -1;                     // closing it ends that process
  Endpoint store_;
};

}  // namespace kolo::socket::testing
