// Note [Small frames pass the data] (engine_io.cc): a clear-to-send for the
// peer's message goes out ahead of this rank's own data frames not yet begun,
// so both directions of a connection move at once. The peer is a raw socket that
// asks for the engine's 32 MiB message but reads nothing until it has announced
// a message of its own: the engine's data then fills the socket and waits in its
// queue, and the clear-to-send must come out after the few MiB the kernel holds,
// not after the whole message.
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

std::string frame_of(FrameType type, const std::string& fixed) {
  std::string out;
  encode_header(FrameHeader{type, 1, static_cast<uint32_t>(fixed.size()), 0}, &out);
  return out + fixed;
}

TEST(SmallFramesPass, AClearToSendPassesQueuedData) {
  // The buffers outlive the engine (declared first, destroyed last).
  const size_t mine = size_t{32} << 20, theirs = size_t{1} << 20;
  std::vector<char> out(mine, 'x'), in(theirs, '\0');
  RawPeerEngine job;
  ASSERT_NO_FATAL_FAILURE(start_with_raw_peer(&job));
  Fd& raw = job.raw;
  std::shared_ptr<Engine>& engine = job.engine;

  // The engine announces its message; the raw peer asks for it (receive 99).
  Engine::RequestId send = 0, recv = 0;
  ASSERT_TRUE(engine->isend(0, 1, out.data(), mine, 5, &send).ok());
  const auto deadline = Clock::now() + milliseconds(5000);
  Frame f;
  do {
    ASSERT_TRUE(read_frame(raw.get(), deadline, "the engine", &f, 64).ok());
  } while (f.header.type != FrameType::kRts);
  RtsMsg rts;
  ASSERT_TRUE(decode_rts(f.payload.data(), f.payload.size(), &rts).ok());
  ASSERT_TRUE(write_all(raw.get(), frame_of(FrameType::kCts, encode_cts(CtsMsg{rts.message, 99})),
                        deadline, "the engine").ok());
  std::this_thread::sleep_for(milliseconds(200));  // the engine fills the socket

  // The raw peer's own message: the engine has its receive posted and answers.
  ASSERT_TRUE(engine->irecv(0, 1, in.data(), theirs, 6, &recv).ok());
  ASSERT_TRUE(write_all(raw.get(), frame_of(FrameType::kRts, encode_rts(RtsMsg{0, 6, 1, theirs})),
                        deadline, "the engine").ok());
  size_t data_before = 0;
  bool answered = false;
  while (!answered) {
    ASSERT_TRUE(read_frame(raw.get(), deadline, "the engine", &f, kChunkBytes + 64).ok());
    if (f.header.type == FrameType::kData) data_before += f.payload.size();
    answered = f.header.type == FrameType::kCts;
  }
  EXPECT_LT(data_before, mine / 2) << "the clear-to-send came after " << data_before
                                   << " bytes of data: it waited behind the queued message";
  raw.reset();  // the peer goes: the engine's teardown does not wait for it
  engine.reset();
}

}  // namespace
}  // namespace kolo::socket
