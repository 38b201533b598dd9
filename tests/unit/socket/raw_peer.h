// Rank 0's Engine with rank 1 played by a raw socket, for tests that must force
// the order of frames on the wire (eager_race_test, small_frames_pass_test).
#pragma once

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <chrono>
#include <memory>
#include <utility>
#include <vector>

#include "transports/socket/engine.h"
#include "transports/socket/net.h"

namespace kolo::socket {

struct RawPeerEngine {
  Fd raw;                          // rank 1's end: the test writes and reads frames here
  std::shared_ptr<Engine> engine;  // rank 0's, over the other end
};

// Call as ASSERT_NO_FATAL_FAILURE(start_with_raw_peer(&job)).
inline void start_with_raw_peer(RawPeerEngine* job) {
  Endpoint where, bound;
  ASSERT_TRUE(resolve("127.0.0.1", 0, &where).ok());
  Fd listener;
  ASSERT_TRUE(listen_on(where, &listener, &bound).ok());
  ASSERT_TRUE(connect_to(bound, std::chrono::steady_clock::now() + std::chrono::milliseconds(2000),
                         "the engine", &job->raw)
                  .ok());
  Fd accepted(::accept(listener.get(), nullptr, nullptr));
  ASSERT_TRUE(accepted.valid());
  PeerLink peer;
  peer.rank = 1;
  peer.fd = std::move(accepted);
  peer.address = "raw peer";
  peer.host = "here";
  std::vector<PeerLink> peers;
  peers.push_back(std::move(peer));
  EngineOptions options;
  options.rank = 0;
  options.size = 2;
  ASSERT_TRUE(Engine::start(options, std::move(peers), &job->engine).ok());
}

}  // namespace kolo::socket
