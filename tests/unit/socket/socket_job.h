// Socket worlds for tests: a store served by the test, and `size` ranks that
// each create their world (transports/socket/socket_world.h) on a thread of
// their own, then run a body on it.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "transports/socket/socket_world.h"
#include "transports/socket/tcp_store.h"

namespace kolo::socket::testing {

class SocketJob {
 public:
  SocketJob() {
    Endpoint where;
    EXPECT_TRUE(resolve("127.0.0.1", 0, &where).ok());
    TcpStoreServer::Options options;
    options.token = "test-token";
    Status s = TcpStoreServer::start(where, options, &server_);
    EXPECT_TRUE(s.ok()) << s.to_string();
  }

  // The options rank `rank` of `size` starts from.
  SocketWorldOptions options(int rank, int size) const {
    SocketWorldOptions o;
    o.store_host = "127.0.0.1";
    o.store_port = server_->endpoint().port();
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

  const Endpoint& store() const { return server_->endpoint(); }

 private:
  std::unique_ptr<TcpStoreServer> server_;
};

}  // namespace kolo::socket::testing
