// The socket world's frames (transports/socket/frame.h): round trips, and every
// way a frame can be malformed, truncated or oversized is a clear error.
#include "transports/socket/frame.h"

#include <gtest/gtest.h>

#include <string>

namespace kolo::socket {
namespace {

std::string header_bytes(FrameType type, int32_t sender, uint32_t length, uint64_t generation) {
  std::string out;
  encode_header(FrameHeader{type, sender, length, generation}, &out);
  return out;
}

TEST(Frame, HeaderRoundTrips) {
  const std::string bytes = header_bytes(FrameType::kControl, 7, 100, 0x1122334455667788ull);
  ASSERT_EQ(bytes.size(), kHeaderBytes);
  FrameHeader h;
  ASSERT_TRUE(decode_header(bytes.data(), bytes.size(), &h).ok());
  EXPECT_EQ(h.type, FrameType::kControl);
  EXPECT_EQ(h.sender, 7);
  EXPECT_EQ(h.length, 100u);
  EXPECT_EQ(h.generation, 0x1122334455667788ull);
}

TEST(Frame, EveryTruncatedHeaderIsRefused) {
  const std::string bytes = header_bytes(FrameType::kHeartbeat, 0, 0, 0);
  for (size_t n = 0; n < kHeaderBytes; ++n) {
    FrameHeader h;
    Status s = decode_header(bytes.data(), n, &h);
    ASSERT_FALSE(s.ok()) << n;
    EXPECT_NE(s.message().find("truncated frame header"), std::string::npos) << s.message();
  }
}

TEST(Frame, BadHeadersSayWhatIsWrong) {
  const std::string good = header_bytes(FrameType::kHeartbeat, 0, 0, 0);
  auto refused = [](std::string bytes, const std::string& words) {
    FrameHeader h;
    Status s = decode_header(bytes.data(), bytes.size(), &h);
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find(words), std::string::npos) << s.message();
  };
  std::string b = good;
  b[0] = 'X';
  refused(b, "bad magic");
  b = good;
  b[4] = 9;
  refused(b, "frame version 9");
  b = good;
  b[5] = 0;
  refused(b, "unknown frame type 0");
  b[5] = 99;
  refused(b, "unknown frame type 99");
  b = good;
  b[6] = 1;
  refused(b, "flags");
  refused(header_bytes(FrameType::kHeartbeat, -2, 0, 0), "sender rank -2");
  refused(header_bytes(FrameType::kHeartbeat, 0, 1, 0), "heartbeat frame of 1 payload bytes");
  refused(header_bytes(FrameType::kCts, 0, 15, 0), "cts frame of 15");
  refused(header_bytes(FrameType::kRing, 0, 13, 0), "ring frame of 13");
  refused(header_bytes(FrameType::kData, 0, 4, 0), "data frame of 4");  // under its fixed part
  refused(header_bytes(FrameType::kData, 0, 16 + kChunkBytes + 1, 0), "data frame");
  refused(header_bytes(FrameType::kEager, 0, 8 + kEagerBytes + 1, 0), "eager frame");
  refused(header_bytes(FrameType::kHello, 0, 100000, 0), "hello frame of 100000");
  refused(header_bytes(FrameType::kControl, 0, 0xffffffffu, 0), "control frame");
}

TEST(Frame, WholeFramesMustBeExact) {
  const std::string frame = encode_frame(FrameType::kVerdict, 3, 1, "rank 2 died");
  Frame f;
  ASSERT_TRUE(decode_frame(frame, &f).ok());
  EXPECT_EQ(f.header.sender, 3);
  EXPECT_EQ(f.payload, "rank 2 died");
  Status s = decode_frame(frame.substr(0, frame.size() - 1), &f);
  EXPECT_NE(s.message().find("truncated"), std::string::npos) << s.message();
  s = decode_frame(frame + "x", &f);
  EXPECT_FALSE(s.ok());
}

TEST(Frame, HelloRoundTripsAndEveryPrefixFails) {
  Hello h;
  h.role = Role::kStore;
  h.token = "secret";
  h.size = 4;
  h.pid = 1234;
  h.host = "node-a";
  const std::string payload = encode_hello(h);
  Hello back;
  ASSERT_TRUE(decode_hello(payload, &back).ok());
  EXPECT_EQ(back.role, Role::kStore);
  EXPECT_EQ(back.token, "secret");
  EXPECT_EQ(back.size, 4);
  EXPECT_EQ(back.pid, 1234);
  EXPECT_EQ(back.host, "node-a");
  for (size_t n = 0; n < payload.size(); ++n)
    EXPECT_FALSE(decode_hello(payload.substr(0, n), &back).ok()) << n;
  EXPECT_FALSE(decode_hello(payload + "z", &back).ok());
  h.token.assign(kMaxTokenBytes + 1, 't');
  Status s = decode_hello(encode_hello(h), &back);
  EXPECT_NE(s.message().find("over the limit"), std::string::npos) << s.message();
  std::string bad_role = payload;
  bad_role[0] = 7;
  EXPECT_NE(decode_hello(bad_role, &back).message().find("role 7"), std::string::npos);
}

TEST(Frame, StoreRequestsRoundTrip) {
  for (StoreOp op : {StoreOp::kSet, StoreOp::kGet, StoreOp::kWait, StoreOp::kAdd,
                     StoreOp::kCompareSet, StoreOp::kDeletePrefix}) {
    StoreRequest q;
    q.op = op;
    q.keys = op == StoreOp::kWait ? std::vector<std::string>{"a", "", "ccc"}
                                  : std::vector<std::string>{"key/1"};
    if (op == StoreOp::kSet || op == StoreOp::kCompareSet) q.value = std::string("v\0v", 3);
    if (op == StoreOp::kCompareSet) q.expected = "old";
    if (op == StoreOp::kAdd) q.delta = -42;
    const std::string bytes = encode_store_request(q);
    StoreRequest back;
    ASSERT_TRUE(decode_store_request(bytes, &back).ok()) << store_op_name(op);
    EXPECT_EQ(back.op, op);
    EXPECT_EQ(back.keys, q.keys);
    EXPECT_EQ(back.value, q.value);
    EXPECT_EQ(back.expected, q.expected);
    EXPECT_EQ(back.delta, q.delta);
    for (size_t n = 0; n < bytes.size(); ++n)
      EXPECT_FALSE(decode_store_request(bytes.substr(0, n), &back).ok()) << store_op_name(op) << n;
  }
  StoreRequest back;
  EXPECT_NE(decode_store_request(std::string(1, '\x09'), &back).message().find("unknown op 9"),
            std::string::npos);
  std::string many = std::string(1, '\x03') + std::string("\xff\xff\xff\x7f", 4);
  EXPECT_NE(decode_store_request(many, &back).message().find("keys"), std::string::npos);
}

TEST(Frame, StoreRepliesRoundTrip) {
  StoreReply r;
  r.value = "value";
  r.number = 99;
  for (StoreOp op : {StoreOp::kGet, StoreOp::kAdd, StoreOp::kCompareSet, StoreOp::kDeletePrefix,
                     StoreOp::kSet, StoreOp::kWait}) {
    const std::string bytes = encode_store_reply(op, r);
    StoreReply back;
    ASSERT_TRUE(decode_store_reply(op, bytes, &back).ok());
    if (op == StoreOp::kGet || op == StoreOp::kCompareSet) {
      EXPECT_EQ(back.value, "value");
    }
    if (op == StoreOp::kAdd || op == StoreOp::kDeletePrefix) {
      EXPECT_EQ(back.number, 99);
    }
    for (size_t n = 0; n < bytes.size(); ++n)
      EXPECT_FALSE(decode_store_reply(op, bytes.substr(0, n), &back).ok());
  }
  StoreReply missing;
  missing.status = StoreStatus::kNotFound;
  StoreReply back;
  EXPECT_TRUE(decode_store_reply(StoreOp::kGet, encode_store_reply(StoreOp::kGet, missing), &back).ok());
  EXPECT_FALSE(decode_store_reply(StoreOp::kAdd, encode_store_reply(StoreOp::kGet, missing), &back).ok());
}

TEST(Frame, FixedPrefixesRoundTripAndRefuseShortInput) {
  RtsMsg rts{5, -3, 77, 1 << 20};
  const std::string bytes = encode_rts(rts);
  RtsMsg back;
  ASSERT_TRUE(decode_rts(bytes.data(), bytes.size(), &back).ok());
  EXPECT_EQ(back.channel, 5u);
  EXPECT_EQ(back.tag, -3);
  EXPECT_EQ(back.message, 77u);
  EXPECT_EQ(back.bytes, uint64_t{1} << 20);
  EXPECT_FALSE(decode_rts(bytes.data(), bytes.size() - 1, &back).ok());
  CtsMsg cts;
  EXPECT_FALSE(decode_cts(bytes.data(), 3, &cts).ok());
  RingMsg ring;
  const std::string r = encode_ring(RingMsg{2, 123456789});
  ASSERT_TRUE(decode_ring(r.data(), r.size(), &ring).ok());
  EXPECT_EQ(ring.cycle, 123456789u);
}

}  // namespace
}  // namespace kolo::socket
