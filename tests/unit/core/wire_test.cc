#include "core/wire.h"

#include <gtest/gtest.h>

#include <random>

namespace kolo::core {
namespace {

std::vector<Request> sample_requests() {
  std::vector<Request> out;
  for (int i = 0; i < 5; ++i) {
    Request r;
    r.name = "layer" + std::to_string(i) + "/grad";
    r.params.dtype = static_cast<DataType>(i % kNumDataTypes);
    r.params.op = static_cast<ReduceOp>(i % kNumReduceOps);
    r.params.device_kind = i % 2 ? DeviceKind::kCuda : DeviceKind::kCpu;
    r.params.count = int64_t{1} << (10 * i % 40);
    r.params.prescale = 0.5 * i;
    r.params.postscale = 1.0 / (i + 1);
    r.params.root = i - 1;
    r.params.row_count = i + 1;
    r.params.send_rows.assign(i, 7 * i);
    r.params.member_counts.assign(i % 3, 5 * i);
    r.params.names_hash = 0x9e3779b97f4a7c15ull * i;
    r.params.deterministic = i % 2 == 0;
    r.params.into = i % 3 == 1;
    if (i % 2) r.params.shapes = {2, i, 3};  // [i, 3]
    if (i == 4) r.params.shapes = {0, 1, 7, 3, 2, 0, 5};  // a group: [], [7], [2, 0, 5]
    if (i == 4) r.params.member_row_counts = {1, 7, 5};
    out.push_back(r);
  }
  out.push_back(Request{std::string(1024, 'x'), TensorParams{}});
  out.push_back(Request{"", TensorParams{}});
  return out;
}

TEST(Wire, RequestsRoundTrip) {
  auto in = sample_requests();
  std::vector<Request> out;
  ASSERT_TRUE(decode_requests(encode_requests(in), &out).ok());
  ASSERT_EQ(out.size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ(out[i].name, in[i].name);
    EXPECT_EQ(out[i].params, in[i].params);
  }
}

TEST(Wire, ResponsesRoundTrip) {
  std::vector<Response> in;
  for (const auto& r : sample_requests()) {
    Response resp{r.name, r.params, r.name.size() % 2 ? Code::kMismatch : Code::kOk,
                  "message for " + r.name, r.params.send_rows, r.params.member_counts,
                  static_cast<int32_t>(r.name.size() % 5) - 1};
    in.push_back(resp);
  }
  std::vector<Response> out;
  ASSERT_TRUE(decode_responses(encode_responses(in), &out).ok());
  ASSERT_EQ(out.size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ(out[i].name, in[i].name);
    EXPECT_EQ(out[i].params, in[i].params);
    EXPECT_EQ(out[i].code, in[i].code);
    EXPECT_EQ(out[i].message, in[i].message);
    EXPECT_EQ(out[i].rows_per_rank, in[i].rows_per_rank);
    EXPECT_EQ(out[i].rows_matrix, in[i].rows_matrix);
    EXPECT_EQ(out[i].last_joined, in[i].last_joined);
  }
}

TEST(Wire, EmptyListsRoundTrip) {
  std::vector<Request> rq{Request{}};
  ASSERT_TRUE(decode_requests(encode_requests({}), &rq).ok());
  EXPECT_TRUE(rq.empty());
}

TEST(Wire, EveryTruncationIsRejected) {
  const std::string full = encode_requests(sample_requests());
  for (size_t n = 0; n < full.size(); ++n) {
    std::vector<Request> out;
    EXPECT_FALSE(decode_requests(full.substr(0, n), &out).ok()) << "length " << n;
  }
  const std::string resp = encode_responses({Response{"a", TensorParams(), Code::kOk, "m", {1, 2}}});
  for (size_t n = 0; n < resp.size(); ++n) {
    std::vector<Response> out;
    EXPECT_FALSE(decode_responses(resp.substr(0, n), &out).ok()) << "length " << n;
  }
}

TEST(Wire, TrailingBytesAndWrongKindAreRejected) {
  std::vector<Request> rq;
  std::vector<Response> rs;
  EXPECT_FALSE(decode_requests(encode_requests(sample_requests()) + "x", &rq).ok());
  EXPECT_FALSE(decode_responses(encode_requests(sample_requests()), &rs).ok());
  EXPECT_FALSE(decode_requests(encode_responses({}), &rq).ok());
}

TEST(Wire, CorruptedBytesNeverCrashAndBadEnumsAreRejected) {
  const std::string full = encode_requests(sample_requests());
  std::mt19937 rng(7);
  int rejected = 0;
  for (int trial = 0; trial < 5000; ++trial) {
    std::string bad = full;
    int flips = 1 + rng() % 4;
    for (int f = 0; f < flips; ++f) bad[rng() % bad.size()] ^= static_cast<char>(1 + rng() % 255);
    std::vector<Request> out;
    Status s = decode_requests(bad, &out);
    if (!s.ok()) {
      ++rejected;
      continue;
    }
    for (const auto& r : out) {  // whatever decodes is in range
      EXPECT_TRUE(is_valid(r.params.dtype));
      EXPECT_TRUE(is_valid(r.params.op));
      EXPECT_GE(r.params.count, 0);
    }
  }
  EXPECT_GT(rejected, 1000);
  // A dtype out of range, specifically: first item's dtype sits after the header
  // (10 bytes), the name (4 + len) and the collective byte.
  std::string bad = encode_requests({Request{"n", TensorParams{}}});
  bad[10 + 4 + 1 + 1] = 99;
  std::vector<Request> out;
  EXPECT_FALSE(decode_requests(bad, &out).ok());
}

TEST(Wire, ShapesThatAreNotWellFormedAreRejected) {
  for (const std::vector<int64_t>& shapes : std::vector<std::vector<int64_t>>{
           {2, 3}, {-1}, {17, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, {1, -4}}) {
    Request r{"n", TensorParams{}};
    r.params.shapes = shapes;
    std::vector<Request> out;
    EXPECT_FALSE(decode_requests(encode_requests({r}), &out).ok()) << shapes.size();
  }
  Request ok{"n", TensorParams{}};
  ok.params.shapes = {16, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
  std::vector<Request> out;
  EXPECT_TRUE(decode_requests(encode_requests({ok}), &out).ok());
}

}  // namespace
}  // namespace kolo::core
