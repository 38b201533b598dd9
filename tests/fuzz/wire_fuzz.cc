// Fuzz target: the negotiation messages' wire decoding (src/core/wire.h).
//
// The first byte picks a mode:
// - even: the rest is a message as it arrives from a peer. Decoding must fail
//   cleanly or succeed; on success, encoding what was decoded gives the same
//   bytes back (the layout has no slack: decode accepts only canonical input).
// - odd: the rest describes requests and responses; encoding them and decoding
//   the result gives them back field by field (doubles bit for bit), every
//   proper prefix of an encoding fails to decode, and a message of one kind does
//   not decode as the other.
#include <cstring>
#include <string>
#include <vector>

#include "core/wire.h"
#include "kolo/kolo.h"
#include "tests/fuzz/fuzz_input.h"

namespace kolo::core {
namespace {

using fuzz::FuzzInput;

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

bool same(const TensorParams& a, const TensorParams& b) {
  return a.collective == b.collective && a.dtype == b.dtype && a.op == b.op &&
         a.device_kind == b.device_kind && a.count == b.count && same_bits(a.prescale, b.prescale) &&
         same_bits(a.postscale, b.postscale) && a.root == b.root &&
         a.row_count == b.row_count && a.send_rows == b.send_rows &&
         a.member_counts == b.member_counts && a.names_hash == b.names_hash;
}

std::vector<int64_t> make_values(FuzzInput* in) {
  std::vector<int64_t> v(in->in_range(0, 8));
  for (int64_t& x : v) x = in->take<int64_t>();
  return v;
}

TensorParams make_params(FuzzInput* in) {
  TensorParams p;
  p.collective = static_cast<Collective>(in->in_range(0, kNumCollectives - 1));
  p.dtype = static_cast<DataType>(in->in_range(0, kNumDataTypes - 1));
  p.op = static_cast<ReduceOp>(in->in_range(0, kNumReduceOps - 1));
  p.device_kind = static_cast<DeviceKind>(in->in_range(0, 1));
  p.count = in->in_range(0, INT64_MAX);
  p.prescale = in->take<double>();
  p.postscale = in->take<double>();
  p.root = in->take<int32_t>();
  p.row_count = in->in_range(1, INT64_MAX);
  p.send_rows = make_values(in);
  p.member_counts = make_values(in);
  p.names_hash = in->take<uint64_t>();
  return p;
}

// Every proper prefix of a valid message is truncated: decoding it must fail.
template <typename T>
void check_prefixes_fail(const std::string& bytes,
                         Status (*decode)(const std::string&, std::vector<T>*)) {
  // Quadratic in the message: bound the work per input.
  const size_t step = bytes.size() > 512 ? bytes.size() / 256 : 1;
  for (size_t n = 0; n < bytes.size(); n += step) {
    std::vector<T> out;
    KOLO_FUZZ_CHECK(!decode(bytes.substr(0, n), &out).ok(), "prefix %zu of %zu decoded", n,
                    bytes.size());
  }
}

void round_trip_requests(FuzzInput* in) {
  std::vector<Request> requests(in->in_range(0, 6));
  for (Request& r : requests) {
    r.name = in->text(64);
    r.params = make_params(in);
  }
  const std::string bytes = encode_requests(requests);
  std::vector<Request> back;
  const Status s = decode_requests(bytes, &back);
  KOLO_FUZZ_CHECK(s.ok(), "%s", s.message().c_str());
  KOLO_FUZZ_CHECK(back.size() == requests.size(), "%zu items back", back.size());
  for (size_t i = 0; i < back.size(); ++i) {
    KOLO_FUZZ_CHECK(back[i].name == requests[i].name, "item %zu name", i);
    KOLO_FUZZ_CHECK(same(back[i].params, requests[i].params), "item %zu params", i);
  }
  check_prefixes_fail(bytes, decode_requests);
  std::vector<Response> wrong_kind;
  KOLO_FUZZ_CHECK(!decode_responses(bytes, &wrong_kind).ok(), "requests decoded as responses");
}

void round_trip_responses(FuzzInput* in) {
  std::vector<Response> responses(in->in_range(0, 6));
  for (Response& r : responses) {
    r.name = in->text(64);
    r.params = make_params(in);
    r.code = static_cast<Code>(in->in_range(0, static_cast<int>(Code::kLast)));
    r.message = in->text(255);
    r.rows_per_rank = make_values(in);
    r.rows_matrix = make_values(in);
    r.last_joined = in->take<int32_t>();
  }
  const std::string bytes = encode_responses(responses);
  std::vector<Response> back;
  const Status s = decode_responses(bytes, &back);
  KOLO_FUZZ_CHECK(s.ok(), "%s", s.message().c_str());
  KOLO_FUZZ_CHECK(back.size() == responses.size(), "%zu items back", back.size());
  for (size_t i = 0; i < back.size(); ++i) {
    const Response& a = back[i];
    const Response& b = responses[i];
    KOLO_FUZZ_CHECK(a.name == b.name && same(a.params, b.params) && a.code == b.code &&
                        a.message == b.message && a.rows_per_rank == b.rows_per_rank &&
                        a.rows_matrix == b.rows_matrix && a.last_joined == b.last_joined,
                    "item %zu differs", i);
  }
  check_prefixes_fail(bytes, decode_responses);
  std::vector<Request> wrong_kind;
  KOLO_FUZZ_CHECK(!decode_requests(bytes, &wrong_kind).ok(), "responses decoded as requests");
}

void decode_raw(const std::string& bytes) {
  std::vector<Request> requests;
  if (decode_requests(bytes, &requests).ok()) {
    for (const Request& r : requests)
      KOLO_FUZZ_CHECK(r.name.size() <= KOLO_MAX_NAME_LENGTH && r.params.count >= 0 &&
                          r.params.row_count >= 1 && is_valid(r.params.dtype) &&
                          is_valid(r.params.op) && is_valid(r.params.device_kind),
                      "decoded a request outside the accepted ranges");
    KOLO_FUZZ_CHECK(encode_requests(requests) == bytes, "requests re-encode differently");
  }
  std::vector<Response> responses;
  if (decode_responses(bytes, &responses).ok()) {
    for (const Response& r : responses)
      KOLO_FUZZ_CHECK(static_cast<int>(r.code) >= 0 && r.code <= Code::kLast,
                      "decoded a response code outside the range");
    KOLO_FUZZ_CHECK(encode_responses(responses) == bytes, "responses re-encode differently");
  }
}

}  // namespace
}  // namespace kolo::core

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kolo::fuzz::FuzzInput in(data, size);
  const uint8_t mode = in.take<uint8_t>();
  if (mode % 2 == 0) {
    kolo::core::decode_raw(in.rest());
  } else if (mode % 4 == 1) {
    kolo::core::round_trip_requests(&in);
  } else {
    kolo::core::round_trip_responses(&in);
  }
  return 0;
}
