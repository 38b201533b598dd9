// Fuzz target: the socket world's frame decoding (transports/socket/frame.h),
// which reads bytes from the network before anyone is authenticated.
//
// The first byte picks a mode:
// - even: the rest is a frame as it arrives. Decoding must fail cleanly or
//   succeed; a decoded header respects its type's bounds; a payload that decodes
//   (hello, store request, store reply for each op, the fixed parts) re-encodes
//   to the same bytes (decoding accepts only canonical input).
// - odd: the rest describes a hello, a store request and a store reply;
//   encoding each and decoding the result gives it back, and every proper
//   prefix of an encoding fails to decode.
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_input.h"
#include "transports/socket/frame.h"

namespace kolo::socket {
namespace {

using fuzz::FuzzInput;

constexpr StoreOp kOps[] = {StoreOp::kSet, StoreOp::kGet, StoreOp::kWait,
                            StoreOp::kAdd, StoreOp::kCompareSet, StoreOp::kDeletePrefix};

template <typename T, typename Decode>
void check_prefixes_fail(const std::string& bytes, Decode decode) {
  const size_t step = bytes.size() > 512 ? bytes.size() / 256 : 1;
  for (size_t n = 0; n < bytes.size(); n += step) {
    T out;
    KOLO_FUZZ_CHECK(!decode(bytes.substr(0, n), &out).ok(), "prefix %zu of %zu decoded", n,
                    bytes.size());
  }
}

void decode_payload(const Frame& f) {
  const std::string& p = f.payload;
  if (f.header.type == FrameType::kHello) {
    Hello h;
    if (decode_hello(p, &h).ok())
      KOLO_FUZZ_CHECK(encode_hello(h) == p && h.token.size() <= kMaxTokenBytes && h.size >= 0,
                      "a hello re-encodes differently or is out of bounds");
  }
  if (f.header.type == FrameType::kStoreRequest) {
    StoreRequest q;
    if (decode_store_request(p, &q).ok())
      KOLO_FUZZ_CHECK(encode_store_request(q) == p, "a store request re-encodes differently");
  }
  if (f.header.type == FrameType::kStoreReply) {
    for (StoreOp op : kOps) {
      StoreReply r;
      if (decode_store_reply(op, p, &r).ok())
        KOLO_FUZZ_CHECK(encode_store_reply(op, r) == p, "a %s reply re-encodes differently",
                        store_op_name(op));
    }
  }
  const size_t fixed = prefix_bytes(f.header.type);
  KOLO_FUZZ_CHECK(p.size() >= fixed, "a %s frame shorter than its fixed part decoded",
                  frame_type_name(f.header.type));
  RingMsg ring;
  ControlPrefix control;
  EagerPrefix eager;
  RtsMsg rts;
  CtsMsg cts;
  DataPrefix data;
  switch (f.header.type) {
    case FrameType::kRing:
      KOLO_FUZZ_CHECK(decode_ring(p.data(), p.size(), &ring).ok() && encode_ring(ring) == p, "ring");
      break;
    case FrameType::kControl:
      KOLO_FUZZ_CHECK(decode_control_prefix(p.data(), p.size(), &control).ok(), "control");
      break;
    case FrameType::kEager:
      KOLO_FUZZ_CHECK(decode_eager_prefix(p.data(), p.size(), &eager).ok(), "eager");
      break;
    case FrameType::kRts:
      KOLO_FUZZ_CHECK(decode_rts(p.data(), p.size(), &rts).ok() && encode_rts(rts) == p, "rts");
      break;
    case FrameType::kCts:
      KOLO_FUZZ_CHECK(decode_cts(p.data(), p.size(), &cts).ok() && encode_cts(cts) == p, "cts");
      break;
    case FrameType::kData:
      KOLO_FUZZ_CHECK(decode_data_prefix(p.data(), p.size(), &data).ok(), "data");
      break;
    default: break;
  }
}

void decode_raw(const std::string& bytes) {
  for (size_t n = 0; n < kHeaderBytes && n <= bytes.size(); ++n) {
    FrameHeader h;
    KOLO_FUZZ_CHECK(!decode_header(bytes.data(), n, &h).ok(), "a %zu-byte header decoded", n);
  }
  Frame f;
  if (!decode_frame(bytes, &f).ok()) return;
  KOLO_FUZZ_CHECK(f.payload.size() == f.header.length, "payload length differs from the header");
  KOLO_FUZZ_CHECK(f.header.length <= max_payload(f.header.type) && f.header.sender >= -1,
                  "a header out of its bounds decoded");
  KOLO_FUZZ_CHECK(encode_frame(f.header.type, f.header.sender, f.header.generation, f.payload) == bytes,
                  "a frame re-encodes differently");
  decode_payload(f);
}

void round_trips(FuzzInput* in) {
  Hello h;
  h.role = static_cast<Role>(in->in_range(0, 1));
  h.token = in->text(kMaxTokenBytes);
  h.size = static_cast<int32_t>(in->in_range(0, INT32_MAX));
  h.pid = in->take<int32_t>();
  h.host = in->text(kMaxHostBytes);
  const std::string hello = encode_hello(h);
  Hello hb;
  KOLO_FUZZ_CHECK(decode_hello(hello, &hb).ok() && hb.token == h.token && hb.host == h.host &&
                      hb.size == h.size && hb.pid == h.pid && hb.role == h.role,
                  "a hello does not round-trip");
  check_prefixes_fail<Hello>(hello, decode_hello);

  StoreRequest q;
  q.op = kOps[in->in_range(0, 5)];
  const int keys = q.op == StoreOp::kWait ? static_cast<int>(in->in_range(0, 5)) : 1;
  for (int i = 0; i < keys; ++i) q.keys.push_back(in->text(64));
  if (q.op == StoreOp::kSet || q.op == StoreOp::kCompareSet) q.value = in->text(255);
  if (q.op == StoreOp::kCompareSet) q.expected = in->text(255);
  if (q.op == StoreOp::kAdd) q.delta = in->take<int64_t>();
  const std::string request = encode_store_request(q);
  StoreRequest qb;
  KOLO_FUZZ_CHECK(decode_store_request(request, &qb).ok() && qb.op == q.op && qb.keys == q.keys &&
                      qb.value == q.value && qb.expected == q.expected && qb.delta == q.delta,
                  "a %s request does not round-trip", store_op_name(q.op));
  check_prefixes_fail<StoreRequest>(request, decode_store_request);

  StoreReply r;
  r.status = static_cast<StoreStatus>(in->in_range(0, 2));
  r.value = in->text(255);
  r.number = in->take<int64_t>();
  const StoreOp op = kOps[in->in_range(0, 5)];
  if (r.status == StoreStatus::kNotFound && op != StoreOp::kGet) r.status = StoreStatus::kOk;
  const std::string reply = encode_store_reply(op, r);
  StoreReply rb;
  KOLO_FUZZ_CHECK(decode_store_reply(op, reply, &rb).ok() && rb.status == r.status,
                  "a %s reply does not round-trip", store_op_name(op));
  check_prefixes_fail<StoreReply>(reply, [op](const std::string& b, StoreReply* out) {
    return decode_store_reply(op, b, out);
  });
}

}  // namespace
}  // namespace kolo::socket

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kolo::fuzz::FuzzInput in(data, size);
  const uint8_t mode = in.take<uint8_t>();
  if (mode % 2 == 0) {
    kolo::socket::decode_raw(in.rest());
  } else {
    kolo::socket::round_trips(&in);
  }
  return 0;
}
