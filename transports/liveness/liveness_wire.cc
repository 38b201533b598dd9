#include "transports/liveness/liveness_wire.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <cstring>

namespace kolo::liveness {
namespace {

constexpr uint32_t kMagic = 0x564c4f4b;  // "KOLV" in memory

void put(std::string* out, const void* p, size_t n) { out->append(static_cast<const char*>(p), n); }

template <typename T>
T get(const char* p) {
  T value;
  std::memcpy(&value, p, sizeof(T));
  return value;
}

bool carries_text(FrameType type) { return type == FrameType::kNotice; }

bool known(uint16_t type) {
  return type >= static_cast<uint16_t>(FrameType::kHello) &&
         type <= static_cast<uint16_t>(FrameType::kBye);
}

}  // namespace

std::string encode(const Frame& frame) {
  const std::string text = carries_text(frame.type) ? frame.text.substr(0, kMaxNoticeText) : "";
  const uint16_t type = static_cast<uint16_t>(frame.type);
  const auto length = static_cast<uint16_t>(text.size());
  std::string out;
  out.reserve(kFrameHeader + text.size());
  put(&out, &kMagic, 4);
  put(&out, &type, 2);
  put(&out, &length, 2);
  put(&out, &frame.from, 4);
  put(&out, &frame.to, 4);
  put(&out, &frame.value, 8);
  out += text;
  return out;
}

Decoded decode(const char* bytes, size_t size, Frame* frame, size_t* consumed, std::string* why) {
  if (size < 4) return Decoded::kNeedMore;
  if (get<uint32_t>(bytes) != kMagic) {
    *why = "not a kolo liveness frame (wrong magic)";
    return Decoded::kBad;
  }
  if (size < kFrameHeader) return Decoded::kNeedMore;
  const auto type = get<uint16_t>(bytes + 4);
  const auto length = get<uint16_t>(bytes + 6);
  if (!known(type)) {
    *why = "unknown liveness frame type " + std::to_string(type);
    return Decoded::kBad;
  }
  frame->type = static_cast<FrameType>(type);
  if (length > (carries_text(frame->type) ? kMaxNoticeText : 0)) {
    *why = "liveness frame of type " + std::to_string(type) + " with " + std::to_string(length) +
           " bytes of text";
    return Decoded::kBad;
  }
  if (size < kFrameHeader + length) return Decoded::kNeedMore;
  frame->from = get<uint32_t>(bytes + 8);
  frame->to = get<uint32_t>(bytes + 12);
  frame->value = get<uint64_t>(bytes + 16);
  frame->text.assign(bytes + kFrameHeader, length);
  *consumed = kFrameHeader + length;
  return Decoded::kFrame;
}

std::string format_address(const std::string& host, uint16_t port,
                           const std::vector<std::string>& ipv4) {
  std::string out = host + "|" + std::to_string(port) + "|";
  for (size_t i = 0; i < ipv4.size(); ++i) out += (i ? "," : "") + ipv4[i];
  return out;
}

bool parse_address(const std::string& text, std::string* host, uint16_t* port,
                   std::vector<std::string>* ipv4, std::string* why) {
  const size_t a = text.find('|');
  const size_t b = a == std::string::npos ? a : text.find('|', a + 1);
  if (b == std::string::npos) {
    *why = "liveness address '" + text + "' is not host|port|addresses";
    return false;
  }
  *host = text.substr(0, a);
  const std::string digits = text.substr(a + 1, b - a - 1);
  char* end = nullptr;
  const unsigned long p = std::strtoul(digits.c_str(), &end, 10);
  if (digits.empty() || *end != '\0' || p == 0 || p > 65535) {
    *why = "liveness address '" + text + "' has no valid port";
    return false;
  }
  *port = static_cast<uint16_t>(p);
  ipv4->clear();
  for (size_t start = b + 1; start <= text.size();) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string one = text.substr(start, comma - start);
    in_addr parsed;
    if (inet_pton(AF_INET, one.c_str(), &parsed) != 1) {
      *why = "liveness address '" + text + "' has '" + one + "', not an IPv4 address";
      return false;
    }
    ipv4->push_back(one);
    start = comma + 1;
  }
  return true;
}

std::vector<std::string> local_ipv4_addresses() {
  std::vector<std::string> out, loopback;
  ifaddrs* all = nullptr;
  if (getifaddrs(&all) != 0) return {"127.0.0.1"};
  for (ifaddrs* i = all; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    if (!(i->ifa_flags & IFF_UP)) continue;
    char text[INET_ADDRSTRLEN];
    const auto* sin = reinterpret_cast<const sockaddr_in*>(i->ifa_addr);
    if (inet_ntop(AF_INET, &sin->sin_addr, text, sizeof text) == nullptr) continue;
    ((i->ifa_flags & IFF_LOOPBACK) ? loopback : out).push_back(text);
  }
  freeifaddrs(all);
  out.insert(out.end(), loopback.begin(), loopback.end());
  if (out.empty()) out.push_back("127.0.0.1");
  return out;
}

}  // namespace kolo::liveness
