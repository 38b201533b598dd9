// The liveness side channel's frames and addresses (transports/liveness/liveness_wire.h).
#include "transports/liveness/liveness_wire.h"

#include <gtest/gtest.h>

#include <string>

namespace kolo::liveness {
namespace {

TEST(LivenessWire, EveryFrameTypeRoundTrips) {
  for (FrameType type : {FrameType::kHello, FrameType::kHelloAck, FrameType::kBeat,
                         FrameType::kNotice, FrameType::kBye}) {
    const Frame in{type, 3, 7, 0x1122334455667788ull,
                   type == FrameType::kNotice ? "rank 7 has exited" : ""};
    const std::string bytes = encode(in) + "next";
    Frame out;
    size_t used = 0;
    std::string why;
    ASSERT_EQ(decode(bytes.data(), bytes.size(), &out, &used, &why), Decoded::kFrame) << why;
    EXPECT_EQ(used, bytes.size() - 4);
    EXPECT_EQ(out.type, in.type);
    EXPECT_EQ(out.from, 3u);
    EXPECT_EQ(out.to, 7u);
    EXPECT_EQ(out.value, in.value);
    EXPECT_EQ(out.text, in.text);
  }
}

TEST(LivenessWire, APartialFrameNeedsMore) {
  const std::string bytes = encode(Frame{FrameType::kNotice, 1, 2, 0, "a reason"});
  for (size_t n = 0; n < bytes.size(); ++n) {
    Frame out;
    size_t used = 0;
    std::string why;
    EXPECT_EQ(decode(bytes.data(), n, &out, &used, &why), Decoded::kNeedMore) << n;
  }
}

TEST(LivenessWire, GarbageAndBadFramesAreRefusedWithAReason) {
  Frame out;
  size_t used = 0;
  std::string why;
  const std::string garbage = "GET / HTTP/1.1\r\n\r\n and more bytes";
  EXPECT_EQ(decode(garbage.data(), garbage.size(), &out, &used, &why), Decoded::kBad);
  EXPECT_NE(why.find("magic"), std::string::npos);

  std::string unknown = encode(Frame{FrameType::kBeat, 1, 2, 0, ""});
  unknown[4] = 99;  // the type
  EXPECT_EQ(decode(unknown.data(), unknown.size(), &out, &used, &why), Decoded::kBad);
  EXPECT_NE(why.find("type 99"), std::string::npos);

  std::string texted = encode(Frame{FrameType::kBeat, 1, 2, 0, ""});
  texted[6] = 5;  // a beat with 5 bytes of text
  texted += "hello";
  EXPECT_EQ(decode(texted.data(), texted.size(), &out, &used, &why), Decoded::kBad);

  std::string huge = encode(Frame{FrameType::kNotice, 1, 2, 0, ""});
  huge[6] = static_cast<char>(0xff);  // 65535 bytes announced
  huge[7] = static_cast<char>(0xff);
  EXPECT_EQ(decode(huge.data(), huge.size(), &out, &used, &why), Decoded::kBad);
}

TEST(LivenessWire, ALongReasonIsCut) {
  const std::string bytes = encode(Frame{FrameType::kNotice, 1, 2, 0, std::string(10000, 'x')});
  EXPECT_EQ(bytes.size(), kFrameHeader + kMaxNoticeText);
}

TEST(LivenessWire, AddressesRoundTripAndBadOnesSayWhy) {
  const std::string text = format_address("h2", 4242, {"10.77.0.2", "127.0.0.1"});
  EXPECT_EQ(text, "h2|4242|10.77.0.2,127.0.0.1");
  std::string host, why;
  uint16_t port = 0;
  std::vector<std::string> ipv4;
  ASSERT_TRUE(parse_address(text, &host, &port, &ipv4, &why)) << why;
  EXPECT_EQ(host, "h2");
  EXPECT_EQ(port, 4242);
  EXPECT_EQ(ipv4, (std::vector<std::string>{"10.77.0.2", "127.0.0.1"}));
  for (const char* bad : {"", "h2", "h2|0|10.0.0.1", "h2|70000|10.0.0.1", "h2|12|", "h2|12|ten",
                          "h2|12x|10.0.0.1"}) {
    EXPECT_FALSE(parse_address(bad, &host, &port, &ipv4, &why)) << bad;
    EXPECT_FALSE(why.empty());
  }
}

TEST(LivenessWire, LocalAddressesPutLoopbackLast) {
  const std::vector<std::string> all = local_ipv4_addresses();
  ASSERT_FALSE(all.empty());
  bool seen_loopback = false;
  for (const std::string& a : all) {
    const bool loopback = a.rfind("127.", 0) == 0;
    EXPECT_FALSE(seen_loopback && !loopback) << "a non-loopback address after loopback: " << a;
    seen_loopback = seen_loopback || loopback;
  }
}

}  // namespace
}  // namespace kolo::liveness
