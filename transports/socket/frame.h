// Frames: the one message format of the socket world — between ranks and
// between a rank and the rendezvous store.
//
// A frame is a 24-byte header and a payload (all integers little-endian):
//
//   offset  size  field
//   0       4     magic      "kos1" (0x31736f6b): a stray connection fails at once
//   4       1     version    kFrameVersion
//   5       1     type       FrameType
//   6       2     flags      0 (reserved)
//   8       4     sender     the sender's rank (int32; -1: a store client without one)
//   12      4     length     payload bytes (uint32), at most max_payload(type)
//   16      8     generation the sender's generation (uint64, Note [Generations])
//
// Types with a fixed payload (heartbeat, ring, rts, cts, ...) must have exactly
// that length; the others have an upper bound (max_payload), so that a peer can
// never make a reader allocate more than the bound. Payload layouts are in the
// comments of FrameType; their parsers below are pure functions of bytes.
//
// Everything here is pure: decoding never reads past what it is given, rejects
// malformed, truncated or oversized input with a Status that says what was
// wrong, and never aborts (tests/fuzz/frame_fuzz.cc holds it to that).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace kolo::socket {

constexpr uint32_t kFrameMagic = 0x31736f6bu;  // "kos1" as bytes on the wire
constexpr uint8_t kFrameVersion = 1;
constexpr size_t kHeaderBytes = 24;

// Limits a peer cannot raise.
constexpr size_t kMaxTokenBytes = 256;
constexpr size_t kMaxHostBytes = 255;
constexpr size_t kMaxReasonBytes = 4096;
constexpr size_t kMaxKeyBytes = 4096;
constexpr size_t kMaxValueBytes = size_t{16} << 20;
constexpr size_t kMaxWaitKeys = 65536;
constexpr size_t kMaxControlBytes = size_t{256} << 20;  // one control-plane blob
// p2p messages sent without a handshake (Note [A ring segment goes eager])
constexpr size_t kEagerBytes = size_t{256} << 10;
constexpr size_t kChunkBytes = size_t{1} << 20;         // one data frame of a larger message

enum class FrameType : uint8_t {
  kHello = 1,         // Hello (below): the first frame of every connection, both ways
  kReject = 2,        // text: why the handshake was refused
  kStoreRequest = 3,  // StoreRequest
  kStoreReply = 4,    // StoreReply
  kHeartbeat = 5,     // empty
  kBye = 6,           // empty: an orderly close follows
  kVerdict = 7,       // text: a failure this rank has declared (Note [One verdict spreads])
  kRing = 8,          // u32 channel, u64 cycle
  kControl = 9,       // u32 channel, u64 key, then the blob
  kEager = 10,        // u32 channel, i32 tag, then the message
  kRts = 11,          // u32 channel, i32 tag, u64 message id, u64 bytes
  kCts = 12,          // u64 message id, u64 receive id
  kData = 13,         // u64 receive id, u64 offset, then up to kChunkBytes of the message
};

const char* frame_type_name(FrameType type);

struct FrameHeader {
  FrameType type = FrameType::kHeartbeat;
  int32_t sender = -1;
  uint32_t length = 0;
  uint64_t generation = 0;
};

// The fixed part of a payload that comes before the bytes it carries (0 for
// types whose payload is all fixed or all bytes): what a reader needs before
// it knows where the rest goes.
size_t prefix_bytes(FrameType type);
// The largest payload accepted for `type`.
size_t max_payload(FrameType type);

// Appends the header's 24 bytes to *out.
void encode_header(const FrameHeader& header, std::string* out);
// Decodes exactly kHeaderBytes from `data` (n is how many are there: fewer is a
// truncated header). Checks magic, version, type, flags, sender >= -1, and the
// length against the type's bound (fixed-length types: exactly).
Status decode_header(const void* data, size_t n, FrameHeader* out);

// A whole frame in one buffer: header and payload, nothing after.
struct Frame {
  FrameHeader header;
  std::string payload;
};
std::string encode_frame(FrameType type, int32_t sender, uint64_t generation,
                         const std::string& payload);
Status decode_frame(const std::string& bytes, Frame* out);

// kHello. Role says what the connection is for; the token proves that both
// ends belong to the job (Note [The job token]).
enum class Role : uint8_t { kPeer = 0, kStore = 1 };
struct Hello {
  Role role = Role::kPeer;
  std::string token;
  int32_t size = 0;  // the world size the sender was started with
  int32_t pid = 0;
  std::string host;  // the sender's host name
};
std::string encode_hello(const Hello& hello);
Status decode_hello(const std::string& payload, Hello* out);

// kStoreRequest / kStoreReply (the store's protocol, tcp_store.h).
enum class StoreOp : uint8_t {
  kSet = 1,           // key, value                 -> ok
  kGet = 2,           // key                        -> ok value | not found
  kWait = 3,          // keys (u32 count, then each) -> ok, once every key exists
  kAdd = 4,           // key, i64 delta             -> ok i64 (the new value)
  kCompareSet = 5,    // key, expected, desired     -> ok value (the value after)
  kDeletePrefix = 6,  // prefix                     -> ok i64 (keys removed)
};
const char* store_op_name(StoreOp op);
struct StoreRequest {
  StoreOp op = StoreOp::kGet;
  std::vector<std::string> keys;  // one, except kWait
  std::string value;              // kSet; kCompareSet: the desired value
  std::string expected;           // kCompareSet
  int64_t delta = 0;              // kAdd
};
std::string encode_store_request(const StoreRequest& request);
Status decode_store_request(const std::string& payload, StoreRequest* out);

enum class StoreStatus : uint8_t { kOk = 0, kNotFound = 1, kError = 2 };
struct StoreReply {
  StoreStatus status = StoreStatus::kOk;
  std::string value;   // kGet, kCompareSet; kError: the message
  int64_t number = 0;  // kAdd, kDeletePrefix
};
// The reply to `op` (which says whether a value or a number follows).
std::string encode_store_reply(StoreOp op, const StoreReply& reply);
Status decode_store_reply(StoreOp op, const std::string& payload, StoreReply* out);

// The fixed prefixes of the data-path frames.
struct RingMsg {
  uint32_t channel = 0;
  uint64_t cycle = 0;
};
struct ControlPrefix {
  uint32_t channel = 0;
  uint64_t key = 0;
};
struct EagerPrefix {
  uint32_t channel = 0;
  int32_t tag = 0;
};
struct RtsMsg {
  uint32_t channel = 0;
  int32_t tag = 0;
  uint64_t message = 0;
  uint64_t bytes = 0;
};
struct CtsMsg {
  uint64_t message = 0;
  uint64_t receive = 0;
};
struct DataPrefix {
  uint64_t receive = 0;
  uint64_t offset = 0;
};
std::string encode_ring(const RingMsg& m);
std::string encode_control_prefix(const ControlPrefix& m);
std::string encode_eager_prefix(const EagerPrefix& m);
std::string encode_rts(const RtsMsg& m);
std::string encode_cts(const CtsMsg& m);
std::string encode_data_prefix(const DataPrefix& m);
// Each reads the fixed part from the first prefix_bytes(type) of `data`; `n`
// is how many bytes are there.
Status decode_ring(const void* data, size_t n, RingMsg* out);
Status decode_control_prefix(const void* data, size_t n, ControlPrefix* out);
Status decode_eager_prefix(const void* data, size_t n, EagerPrefix* out);
Status decode_rts(const void* data, size_t n, RtsMsg* out);
Status decode_cts(const void* data, size_t n, CtsMsg* out);
Status decode_data_prefix(const void* data, size_t n, DataPrefix* out);

// Note [A ring segment goes eager]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The eager limit is at least the ring's default segment (KOLO_RING_SEGMENT_BYTES,
// 256K): a larger message waits one round trip for its clear-to-send, and the
// ring pays that on every segment it forwards, so across hosts its link idled
// between segments (docs/socket-world.md has the runs). The price: an eager
// message whose receive is not yet posted is held in the unexpected queue, up to
// this many bytes each.

// Note [Generations]
// ~~~~~~~~~~~~~~~~~~
// A generation numbers one forming of the world (elastic re-forming makes the
// next, issue 31). Every frame carries it and every store key of a world lives
// under it (rendezvous.h), so ranks of different generations neither read each
// other's keys nor accept each other's connections.

// Note [The job token]
// ~~~~~~~~~~~~~~~~~~~~
// The launcher draws a token and hands it to every rank (KOLO_JOB_TOKEN). A
// connection must open with a Hello carrying it; until it has, nothing it sends
// is acted on and nothing is written to it, and a wrong token closes it. Both
// ends send one, so a rank also knows it reached its peer and not a stranger on
// a reused port. The token is compared in constant time.

}  // namespace kolo::socket
