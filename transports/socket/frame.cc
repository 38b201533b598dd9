#include "transports/socket/frame.h"

#include <cstring>

#include "common/check.h"

namespace kolo::socket {
namespace {

void put_u8(std::string* out, uint8_t v) { out->push_back(static_cast<char>(v)); }

template <typename T>
void put(std::string* out, T v) {
  unsigned char bytes[sizeof(T)];
  auto u = static_cast<std::make_unsigned_t<T>>(v);
  for (size_t i = 0; i < sizeof(T); ++i) bytes[i] = static_cast<unsigned char>(u >> (8 * i));
  out->append(reinterpret_cast<const char*>(bytes), sizeof(T));
}

template <typename T>
T get_at(const unsigned char* p) {
  std::make_unsigned_t<T> u = 0;
  for (size_t i = 0; i < sizeof(T); ++i) u |= static_cast<std::make_unsigned_t<T>>(p[i]) << (8 * i);
  return static_cast<T>(u);
}

void put_string(std::string* out, const std::string& s) {
  put<uint32_t>(out, static_cast<uint32_t>(s.size()));
  out->append(s);
}

// Reads a payload front to back; the first read past the end (or a string over
// its bound) sets an error naming the field, and every later read is a no-op.
class Reader {
 public:
  Reader(const std::string& bytes, const char* what)
      : p_(reinterpret_cast<const unsigned char*>(bytes.data())), n_(bytes.size()), what_(what) {}

  template <typename T>
  T take(const char* field) {
    if (!need(sizeof(T), field)) return T{};
    T v = get_at<T>(p_ + pos_);
    pos_ += sizeof(T);
    return v;
  }
  std::string string(const char* field, size_t max) {
    const uint32_t length = take<uint32_t>(field);
    if (!error_.ok()) return {};
    if (length > max) {
      fail(std::string(field) + " of " + std::to_string(length) + " bytes is over the limit of " +
           std::to_string(max));
      return {};
    }
    if (!need(length, field)) return {};
    std::string s(reinterpret_cast<const char*>(p_ + pos_), length);
    pos_ += length;
    return s;
  }
  // The payload must end here.
  Status finish() {
    if (error_.ok() && pos_ != n_)
      fail(std::to_string(n_ - pos_) + " bytes left over after the last field");
    return error_;
  }
  void fail(const std::string& why) {
    if (error_.ok()) error_ = invalid_argument(std::string("malformed ") + what_ + ": " + why);
  }
  bool ok() const { return error_.ok(); }

 private:
  bool need(size_t bytes, const char* field) {
    if (!error_.ok()) return false;
    if (n_ - pos_ < bytes) {
      fail(std::string("truncated in ") + field + " (" + std::to_string(n_ - pos_) +
           " bytes left, " + std::to_string(bytes) + " needed)");
      return false;
    }
    return true;
  }

  const unsigned char* p_;
  size_t n_;
  size_t pos_ = 0;
  const char* what_;
  Status error_;
};

Status short_prefix(FrameType type, size_t n) {
  return invalid_argument(std::string("malformed ") + frame_type_name(type) + " frame: " +
                          std::to_string(n) + " bytes, its fixed part is " +
                          std::to_string(prefix_bytes(type)));
}

const unsigned char* bytes_of(const void* data) { return static_cast<const unsigned char*>(data); }

}  // namespace

const char* frame_type_name(FrameType type) {
  switch (type) {
    case FrameType::kHello: return "hello";
    case FrameType::kReject: return "reject";
    case FrameType::kStoreRequest: return "store request";
    case FrameType::kStoreReply: return "store reply";
    case FrameType::kHeartbeat: return "heartbeat";
    case FrameType::kBye: return "bye";
    case FrameType::kVerdict: return "verdict";
    case FrameType::kRing: return "ring";
    case FrameType::kControl: return "control";
    case FrameType::kEager: return "eager";
    case FrameType::kRts: return "rts";
    case FrameType::kCts: return "cts";
    case FrameType::kData: return "data";
  }
  return "unknown";
}

size_t prefix_bytes(FrameType type) {
  switch (type) {
    case FrameType::kRing: return 12;
    case FrameType::kControl: return 12;
    case FrameType::kEager: return 8;
    case FrameType::kRts: return 24;
    case FrameType::kCts: return 16;
    case FrameType::kData: return 16;
    default: return 0;
  }
}

size_t max_payload(FrameType type) {
  switch (type) {
    case FrameType::kHello: return 1 + 4 + kMaxTokenBytes + 8 + 4 + kMaxHostBytes;
    case FrameType::kReject:
    case FrameType::kVerdict: return kMaxReasonBytes;
    case FrameType::kStoreRequest:
      // The largest: a compare-and-set (two values) or a wait for many keys.
      return 1 + 3 * 4 + kMaxKeyBytes + 2 * kMaxValueBytes;
    case FrameType::kStoreReply: return 1 + 4 + kMaxValueBytes;
    case FrameType::kHeartbeat:
    case FrameType::kBye: return 0;
    case FrameType::kRing:
    case FrameType::kRts:
    case FrameType::kCts: return prefix_bytes(type);
    case FrameType::kControl: return prefix_bytes(type) + kMaxControlBytes;
    case FrameType::kEager: return prefix_bytes(type) + kEagerBytes;
    case FrameType::kData: return prefix_bytes(type) + kChunkBytes;
  }
  return 0;
}

void encode_header(const FrameHeader& h, std::string* out) {
  put<uint32_t>(out, kFrameMagic);
  put_u8(out, kFrameVersion);
  put_u8(out, static_cast<uint8_t>(h.type));
  put<uint16_t>(out, 0);
  put<int32_t>(out, h.sender);
  put<uint32_t>(out, h.length);
  put<uint64_t>(out, h.generation);
}

Status decode_header(const void* data, size_t n, FrameHeader* out) {
  if (n < kHeaderBytes)
    return invalid_argument("truncated frame header: " + std::to_string(n) + " of " +
                            std::to_string(kHeaderBytes) + " bytes");
  const unsigned char* p = bytes_of(data);
  if (get_at<uint32_t>(p) != kFrameMagic)
    return invalid_argument("not a kolo frame (bad magic): the peer does not speak kolo's "
                            "socket protocol");
  if (p[4] != kFrameVersion)
    return invalid_argument("frame version " + std::to_string(p[4]) + ", this kolo speaks " +
                            std::to_string(kFrameVersion));
  const uint8_t type = p[5];
  if (type < static_cast<uint8_t>(FrameType::kHello) || type > static_cast<uint8_t>(FrameType::kData))
    return invalid_argument("unknown frame type " + std::to_string(type));
  if (get_at<uint16_t>(p + 6) != 0)
    return invalid_argument("frame flags are " + std::to_string(get_at<uint16_t>(p + 6)) +
                            ", must be 0");
  FrameHeader h;
  h.type = static_cast<FrameType>(type);
  h.sender = get_at<int32_t>(p + 8);
  h.length = get_at<uint32_t>(p + 12);
  h.generation = get_at<uint64_t>(p + 16);
  if (h.sender < -1) return invalid_argument("frame sender rank " + std::to_string(h.sender));
  const size_t fixed = prefix_bytes(h.type);
  if (h.length > max_payload(h.type) || h.length < fixed)
    return invalid_argument(std::string(frame_type_name(h.type)) + " frame of " +
                            std::to_string(h.length) + " payload bytes (accepted: " +
                            std::to_string(fixed) + " to " +
                            std::to_string(max_payload(h.type)) + ")");
  *out = h;
  return Status::OK();
}

std::string encode_frame(FrameType type, int32_t sender, uint64_t generation,
                         const std::string& payload) {
  std::string out;
  out.reserve(kHeaderBytes + payload.size());
  encode_header(FrameHeader{type, sender, static_cast<uint32_t>(payload.size()), generation}, &out);
  out += payload;
  return out;
}

Status decode_frame(const std::string& bytes, Frame* out) {
  FrameHeader h;
  KOLO_RETURN_IF_ERROR_AS_IS(decode_header(bytes.data(), bytes.size(), &h));
  const size_t have = bytes.size() - kHeaderBytes;
  if (have != h.length)
    return invalid_argument(std::string(frame_type_name(h.type)) + " frame says " +
                            std::to_string(h.length) + " payload bytes, " + std::to_string(have) +
                            (have < h.length ? " arrived (truncated)" : " are there"));
  out->header = h;
  out->payload = bytes.substr(kHeaderBytes);
  return Status::OK();
}

std::string encode_hello(const Hello& hello) {
  std::string out;
  put_u8(&out, static_cast<uint8_t>(hello.role));
  put_string(&out, hello.token);
  put<int32_t>(&out, hello.size);
  put<int32_t>(&out, hello.pid);
  put_string(&out, hello.host);
  return out;
}

Status decode_hello(const std::string& payload, Hello* out) {
  Reader r(payload, "hello");
  Hello h;
  const uint8_t role = r.take<uint8_t>("role");
  h.token = r.string("token", kMaxTokenBytes);
  h.size = r.take<int32_t>("world size");
  h.pid = r.take<int32_t>("pid");
  h.host = r.string("host name", kMaxHostBytes);
  if (r.ok() && role > static_cast<uint8_t>(Role::kStore)) r.fail("role " + std::to_string(role));
  if (r.ok() && h.size < 0) r.fail("world size " + std::to_string(h.size));
  KOLO_RETURN_IF_ERROR_AS_IS(r.finish());
  h.role = static_cast<Role>(role);
  *out = std::move(h);
  return Status::OK();
}

const char* store_op_name(StoreOp op) {
  switch (op) {
    case StoreOp::kSet: return "set";
    case StoreOp::kGet: return "get";
    case StoreOp::kWait: return "wait";
    case StoreOp::kAdd: return "add";
    case StoreOp::kCompareSet: return "compare_and_set";
    case StoreOp::kDeletePrefix: return "delete_prefix";
  }
  return "unknown";
}

std::string encode_store_request(const StoreRequest& q) {
  std::string out;
  put_u8(&out, static_cast<uint8_t>(q.op));
  if (q.op == StoreOp::kWait) {
    put<uint32_t>(&out, static_cast<uint32_t>(q.keys.size()));
    for (const std::string& k : q.keys) put_string(&out, k);
    return out;
  }
  put_string(&out, q.keys.empty() ? std::string() : q.keys[0]);
  if (q.op == StoreOp::kSet) put_string(&out, q.value);
  if (q.op == StoreOp::kAdd) put<int64_t>(&out, q.delta);
  if (q.op == StoreOp::kCompareSet) {
    put_string(&out, q.expected);
    put_string(&out, q.value);
  }
  return out;
}

Status decode_store_request(const std::string& payload, StoreRequest* out) {
  Reader r(payload, "store request");
  StoreRequest q;
  const uint8_t op = r.take<uint8_t>("op");
  if (r.ok() && (op < static_cast<uint8_t>(StoreOp::kSet) ||
                 op > static_cast<uint8_t>(StoreOp::kDeletePrefix)))
    r.fail("unknown op " + std::to_string(op));
  q.op = static_cast<StoreOp>(op);
  if (r.ok() && q.op == StoreOp::kWait) {
    const uint32_t n = r.take<uint32_t>("key count");
    if (r.ok() && n > kMaxWaitKeys) r.fail("wait for " + std::to_string(n) + " keys");
    for (uint32_t i = 0; r.ok() && i < n; ++i) q.keys.push_back(r.string("key", kMaxKeyBytes));
  } else if (r.ok()) {
    q.keys.push_back(r.string("key", kMaxKeyBytes));
    if (q.op == StoreOp::kSet) q.value = r.string("value", kMaxValueBytes);
    if (q.op == StoreOp::kAdd) q.delta = r.take<int64_t>("delta");
    if (q.op == StoreOp::kCompareSet) {
      q.expected = r.string("expected value", kMaxValueBytes);
      q.value = r.string("desired value", kMaxValueBytes);
    }
  }
  KOLO_RETURN_IF_ERROR_AS_IS(r.finish());
  *out = std::move(q);
  return Status::OK();
}

std::string encode_store_reply(StoreOp op, const StoreReply& reply) {
  std::string out;
  put_u8(&out, static_cast<uint8_t>(reply.status));
  if (reply.status == StoreStatus::kError) {
    put_string(&out, reply.value);
  } else if (reply.status == StoreStatus::kOk) {
    if (op == StoreOp::kGet || op == StoreOp::kCompareSet) put_string(&out, reply.value);
    if (op == StoreOp::kAdd || op == StoreOp::kDeletePrefix) put<int64_t>(&out, reply.number);
  }
  return out;
}

Status decode_store_reply(StoreOp op, const std::string& payload, StoreReply* out) {
  Reader r(payload, "store reply");
  StoreReply a;
  const uint8_t status = r.take<uint8_t>("status");
  if (r.ok() && status > static_cast<uint8_t>(StoreStatus::kError))
    r.fail("unknown status " + std::to_string(status));
  a.status = static_cast<StoreStatus>(status);
  if (r.ok() && a.status == StoreStatus::kError) {
    a.value = r.string("error message", kMaxReasonBytes);
  } else if (r.ok() && a.status == StoreStatus::kOk) {
    if (op == StoreOp::kGet || op == StoreOp::kCompareSet) a.value = r.string("value", kMaxValueBytes);
    if (op == StoreOp::kAdd || op == StoreOp::kDeletePrefix) a.number = r.take<int64_t>("number");
  } else if (r.ok() && op != StoreOp::kGet) {
    r.fail(std::string("'not found' is no answer to ") + store_op_name(op));
  }
  KOLO_RETURN_IF_ERROR_AS_IS(r.finish());
  *out = std::move(a);
  return Status::OK();
}

std::string encode_ring(const RingMsg& m) {
  std::string out;
  put<uint32_t>(&out, m.channel);
  put<uint64_t>(&out, m.cycle);
  return out;
}

std::string encode_control_prefix(const ControlPrefix& m) {
  std::string out;
  put<uint32_t>(&out, m.channel);
  put<uint64_t>(&out, m.key);
  return out;
}

std::string encode_eager_prefix(const EagerPrefix& m) {
  std::string out;
  put<uint32_t>(&out, m.channel);
  put<int32_t>(&out, m.tag);
  return out;
}

std::string encode_rts(const RtsMsg& m) {
  std::string out;
  put<uint32_t>(&out, m.channel);
  put<int32_t>(&out, m.tag);
  put<uint64_t>(&out, m.message);
  put<uint64_t>(&out, m.bytes);
  return out;
}

std::string encode_cts(const CtsMsg& m) {
  std::string out;
  put<uint64_t>(&out, m.message);
  put<uint64_t>(&out, m.receive);
  return out;
}

std::string encode_data_prefix(const DataPrefix& m) {
  std::string out;
  put<uint64_t>(&out, m.receive);
  put<uint64_t>(&out, m.offset);
  return out;
}

Status decode_ring(const void* data, size_t n, RingMsg* out) {
  if (n < prefix_bytes(FrameType::kRing)) return short_prefix(FrameType::kRing, n);
  out->channel = get_at<uint32_t>(bytes_of(data));
  out->cycle = get_at<uint64_t>(bytes_of(data) + 4);
  return Status::OK();
}

Status decode_control_prefix(const void* data, size_t n, ControlPrefix* out) {
  if (n < prefix_bytes(FrameType::kControl)) return short_prefix(FrameType::kControl, n);
  out->channel = get_at<uint32_t>(bytes_of(data));
  out->key = get_at<uint64_t>(bytes_of(data) + 4);
  return Status::OK();
}

Status decode_eager_prefix(const void* data, size_t n, EagerPrefix* out) {
  if (n < prefix_bytes(FrameType::kEager)) return short_prefix(FrameType::kEager, n);
  out->channel = get_at<uint32_t>(bytes_of(data));
  out->tag = get_at<int32_t>(bytes_of(data) + 4);
  return Status::OK();
}

Status decode_rts(const void* data, size_t n, RtsMsg* out) {
  if (n < prefix_bytes(FrameType::kRts)) return short_prefix(FrameType::kRts, n);
  const unsigned char* p = bytes_of(data);
  out->channel = get_at<uint32_t>(p);
  out->tag = get_at<int32_t>(p + 4);
  out->message = get_at<uint64_t>(p + 8);
  out->bytes = get_at<uint64_t>(p + 16);
  return Status::OK();
}

Status decode_cts(const void* data, size_t n, CtsMsg* out) {
  if (n < prefix_bytes(FrameType::kCts)) return short_prefix(FrameType::kCts, n);
  out->message = get_at<uint64_t>(bytes_of(data));
  out->receive = get_at<uint64_t>(bytes_of(data) + 8);
  return Status::OK();
}

Status decode_data_prefix(const void* data, size_t n, DataPrefix* out) {
  if (n < prefix_bytes(FrameType::kData)) return short_prefix(FrameType::kData, n);
  out->receive = get_at<uint64_t>(bytes_of(data));
  out->offset = get_at<uint64_t>(bytes_of(data) + 8);
  return Status::OK();
}

}  // namespace kolo::socket
