// The pure parts of negotiation: validation of one name's requests, the response
// cache and rank 0's message table.
#include <gtest/gtest.h>

#include "core/message_table.h"
#include "core/request.h"
#include "core/response_cache.h"

namespace kolo::core {
namespace {

Request req(const std::string& name, int64_t count = 4, DataType dtype = DataType::kFloat32) {
  Request r;
  r.name = name;
  r.params.count = count;
  r.params.dtype = dtype;
  return r;
}

Response ok_response(const std::string& name, int64_t count = 4) {
  return Response{name, req(name, count).params, Code::kOk, ""};
}

TEST(Validate, AgreeingRequestsGiveOk) {
  Response r = validate({req("a"), req("a"), req("a")});
  EXPECT_EQ(r.code, Code::kOk);
  EXPECT_EQ(r.params, req("a").params);
}

TEST(Validate, EachFieldMismatchIsNamedWithValuesPerRank) {
  struct Case {
    std::function<void(TensorParams&)> change;
    std::string field, rank0, rank1;
  };
  std::vector<Case> cases = {
      {[](TensorParams& p) { p.dtype = DataType::kFloat64; }, "dtype", "float32", "float64"},
      {[](TensorParams& p) { p.count = 5; }, "count", "4", "5"},
      {[](TensorParams& p) { p.op = ReduceOp::kMax; }, "op", "sum", "max"},
      {[](TensorParams& p) { p.prescale = 2; }, "prescale", "1", "2"},
      {[](TensorParams& p) { p.postscale = 0.5; }, "postscale", "1", "0.5"},
      {[](TensorParams& p) { p.device = DeviceKind::kCuda; }, "device", "cpu", "cuda"},
      {[](TensorParams& p) { p.root = 1; }, "root", "-1", "1"},
  };
  for (const Case& c : cases) {
    Request other = req("grad");
    c.change(other.params);
    Response r = validate({req("grad"), other, req("grad")});
    EXPECT_EQ(r.code, Code::kMismatch);
    EXPECT_NE(r.message.find("'grad'"), std::string::npos) << r.message;
    EXPECT_NE(r.message.find(c.field), std::string::npos) << r.message;
    EXPECT_NE(r.message.find(c.rank0 + " on ranks 0,2"), std::string::npos) << r.message;
    EXPECT_NE(r.message.find(c.rank1 + " on rank 1"), std::string::npos) << r.message;
  }
}

TEST(ResponseCache, HitMissStale) {
  ResponseCache cache(4);
  uint32_t bit = 99;
  EXPECT_EQ(cache.lookup(req("a"), &bit), ResponseCache::Lookup::kMiss);
  std::optional<uint32_t> evicted;
  cache.put(ok_response("a"), &evicted);
  EXPECT_FALSE(evicted);
  EXPECT_EQ(cache.lookup(req("a"), &bit), ResponseCache::Lookup::kHit);
  EXPECT_EQ(bit, 0u);
  EXPECT_EQ(cache.lookup(req("a", 5), &bit), ResponseCache::Lookup::kStale);
  EXPECT_EQ(cache.at(0).name, "a");
}

TEST(ResponseCache, EvictsLeastRecentlyTouchedAndReusesLowestBit) {
  ResponseCache cache(3);
  std::optional<uint32_t> evicted;
  for (const char* n : {"a", "b", "c"}) cache.put(ok_response(n), &evicted);
  cache.touch(0);  // a is now the most recent; b (bit 1) the least
  cache.put(ok_response("d"), &evicted);
  ASSERT_TRUE(evicted);
  EXPECT_EQ(*evicted, 1u);
  uint32_t bit;
  EXPECT_EQ(cache.lookup(req("b"), &bit), ResponseCache::Lookup::kMiss);
  EXPECT_EQ(cache.lookup(req("d"), &bit), ResponseCache::Lookup::kHit);
  EXPECT_EQ(bit, 1u);
  cache.erase(0);
  EXPECT_EQ(cache.size(), 2u);
  cache.put(ok_response("e"), &evicted);
  EXPECT_FALSE(evicted);
  EXPECT_EQ(cache.lookup(req("e"), &bit), ResponseCache::Lookup::kHit);
  EXPECT_EQ(bit, 0u);
}

TEST(ResponseCache, CapacityZeroCachesNothing) {
  ResponseCache cache(0);
  std::optional<uint32_t> evicted;
  cache.put(ok_response("a"), &evicted);
  uint32_t bit;
  EXPECT_EQ(cache.lookup(req("a"), &bit), ResponseCache::Lookup::kMiss);
}

// Two caches fed the same history agree bit for bit (the cache invariant).
TEST(ResponseCache, SameHistoryGivesSameState) {
  ResponseCache a(8), b(8);
  std::optional<uint32_t> ea, eb;
  for (int i = 0; i < 100; ++i) {
    std::string name = "t" + std::to_string((i * 7) % 13);
    uint32_t bit;
    if (a.lookup(req(name), &bit) == ResponseCache::Lookup::kHit) {
      a.touch(bit);
      b.touch(bit);
    } else {
      a.put(ok_response(name), &ea);
      b.put(ok_response(name), &eb);
      EXPECT_EQ(ea, eb);
    }
  }
  for (uint32_t bit = 0; bit < 8; ++bit) {
    ASSERT_EQ(a.occupied(bit), b.occupied(bit));
    if (a.occupied(bit)) {
      EXPECT_EQ(a.at(bit).name, b.at(bit).name);
    }
  }
}

TEST(MessageTable, ReadyWhenEveryRankAsked) {
  MessageTable table(3);
  auto now = MessageTable::Clock::now();
  EXPECT_FALSE(table.add(2, req("x"), now));
  EXPECT_FALSE(table.add(0, req("x"), now));
  EXPECT_FALSE(table.add(0, req("x"), now));  // a repeat does not count twice
  auto r = table.add(1, req("x"), now);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->code, Code::kOk);
  EXPECT_EQ(table.pending(), 0u);
}

TEST(MessageTable, StallsNameMissingRanksAndFailOnRequest) {
  MessageTable table(3);
  auto t0 = MessageTable::Clock::now();
  (void)table.add(0, req("slow"), t0);
  (void)table.add(2, req("slow"), t0);
  (void)table.add(1, req("fine"), t0 + std::chrono::seconds(10));
  auto stalls = table.stalls(t0 + std::chrono::seconds(5), 2.0);
  ASSERT_EQ(stalls.size(), 1u);
  EXPECT_EQ(stalls[0].name, "slow");
  EXPECT_EQ(stalls[0].missing_ranks, std::vector<int>{1});
  std::string text = describe_stalls(stalls);
  EXPECT_NE(text.find("1: [slow]"), std::string::npos) << text;
  auto failed = table.fail_stalled(stalls);
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0].code, Code::kStalled);
  EXPECT_NE(failed[0].message.find("missing ranks: 1"), std::string::npos) << failed[0].message;
  EXPECT_EQ(table.pending(), 1u);
}

}  // namespace
}  // namespace kolo::core
