// The frames of kolo's liveness side channel (tcp_liveness.h), and the few socket
// helpers it needs. Pure encode/decode, testable without sockets.
//
// A frame is a 24-byte header, little-endian as the machines kolo runs on, then
// `length` bytes of text (a notice's reason; empty for the others):
//   magic "KOLV" | type u16 | length u16 | from u32 | to u32 | value u64
// value: the job token (Hello, HelloAck), the beat's number (Beat), 0 otherwise.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace kolo::liveness {

enum class FrameType : uint16_t {
  kHello = 1,     // dialer -> listener, first: who, to whom, the token
  kHelloAck = 2,  // listener -> dialer: accepted
  kBeat = 3,      // "still here", every interval
  kNotice = 4,    // "this rank has reached a failure verdict", with the reason
  kBye = 5,       // "this rank's world is being torn down, in order"
};

struct Frame {
  FrameType type = FrameType::kBeat;
  uint32_t from = 0;
  uint32_t to = 0;
  uint64_t value = 0;
  std::string text;
};

constexpr size_t kFrameHeader = 24;
constexpr size_t kMaxNoticeText = 2048;  // longer reasons are cut

// The bytes of `frame` (its text cut to kMaxNoticeText).
std::string encode(const Frame& frame);

enum class Decoded { kNeedMore, kFrame, kBad };
// Decodes the frame at the start of `bytes`: kFrame sets *frame and *consumed;
// kNeedMore when the bytes end inside a frame; kBad (with *why) for a wrong magic,
// an unknown type, or text on a frame that carries none or more than allowed.
Decoded decode(const char* bytes, size_t size, Frame* frame, size_t* consumed, std::string* why);

// "host|port|a.b.c.d,..." and back. parse_address fails (false, *why) on text
// that is not of that form.
std::string format_address(const std::string& host, uint16_t port,
                           const std::vector<std::string>& ipv4);
bool parse_address(const std::string& text, std::string* host, uint16_t* port,
                   std::vector<std::string>* ipv4, std::string* why);

// This host's IPv4 addresses on interfaces that are up, loopback last.
std::vector<std::string> local_ipv4_addresses();

}  // namespace kolo::liveness
