// Note [A receive posted while its message was arriving] (engine_io.cc): an eager
// message whose header came before its receive was posted, and whose body was
// still arriving when it was, completes that receive. The peer here is a raw
// socket that writes the frame in two parts with the receive posted between them,
// so the order is forced, not hoped for.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <chrono>
#include <thread>
#include <vector>

#include "transports/socket/engine.h"
#include "transports/socket/frame.h"
#include "transports/socket/net.h"
#include "tests/unit/socket/raw_peer.h"

namespace kolo::socket {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

TEST(EagerRace, AReceivePostedWhileItsMessageArrivesGetsIt) {
  RawPeerEngine job;
  ASSERT_NO_FATAL_FAILURE(start_with_raw_peer(&job));
  Fd& raw = job.raw;
  std::shared_ptr<Engine>& engine = job.engine;

  // Rank 1's eager message of 60000 bytes (under kEagerBytes), tag 7, channel 0.
  const size_t bytes = 60000;
  std::string body(bytes, '\0');
  for (size_t i = 0; i < bytes; ++i) body[i] = static_cast<char>(i * 31 + 7);
  std::string frame;
  encode_header(FrameHeader{FrameType::kEager, 1,
                            static_cast<uint32_t>(prefix_bytes(FrameType::kEager) + bytes), 0},
                &frame);
  frame += encode_eager_prefix(EagerPrefix{0, 7});
  frame += body;
  const size_t first = frame.size() - bytes + 1000;  // the header, prefix and 1000 bytes
  const auto deadline = Clock::now() + milliseconds(2000);
  ASSERT_TRUE(write_all(raw.get(), frame.substr(0, first), deadline, "the engine").ok());
  std::this_thread::sleep_for(milliseconds(200));  // the engine reads that much

  std::vector<char> got(bytes, '\0');
  Engine::RequestId id = 0;
  ASSERT_TRUE(engine->irecv(0, 1, got.data(), bytes, 7, &id).ok());
  ASSERT_TRUE(write_all(raw.get(), frame.substr(first), deadline, "the engine").ok());

  bool done = false;
  for (auto until = Clock::now() + milliseconds(5000); !done && Clock::now() < until;) {
    ASSERT_TRUE(engine->test(id, &done).ok());
    if (!done) std::this_thread::sleep_for(milliseconds(1));
  }
  ASSERT_TRUE(done) << "the receive never completed: the message waits as unexpected";
  ASSERT_TRUE(engine->wait(id).ok());
  EXPECT_EQ(std::string(got.data(), bytes), body);
  raw.reset();  // the peer goes: the engine's teardown does not wait for it
  engine.reset();
}

}  // namespace
}  // namespace kolo::socket
