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
  return Response{name, req(name, count).params, Code::kOk, "", {}};
}

TEST(Validate, AgreeingRequestsGiveOk) {
  Response r = validate({req("a"), req("a"), req("a")});  // optionals by conversion
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
      {[](TensorParams& p) { p.device_kind = DeviceKind::kCuda; }, "device", "cpu", "cuda"},
  };
  for (const Case& c : cases) {
    Request other = req("grad");
    c.change(other.params);
    Response r = validate({req("grad"), other, req("grad")});  // optionals by conversion
    EXPECT_EQ(r.code, Code::kMismatch);
    EXPECT_NE(r.message.find("'grad'"), std::string::npos) << r.message;
    EXPECT_NE(r.message.find(c.field), std::string::npos) << r.message;
    EXPECT_NE(r.message.find(c.rank0 + " on ranks 0,2"), std::string::npos) << r.message;
    EXPECT_NE(r.message.find(c.rank1 + " on rank 1"), std::string::npos) << r.message;
  }
}

TEST(Validate, BroadcastRootMismatchAndIgnoredFields) {
  Request a = req("b"), b = req("b");
  a.params.collective = b.params.collective = Collective::kBroadcast;
  a.params.root = 0;
  b.params.root = 1;
  Response r = validate({a, b});
  EXPECT_EQ(r.code, Code::kMismatch);
  EXPECT_NE(r.message.find("root: 0 on rank 0; 1 on rank 1"), std::string::npos) << r.message;
  b.params.root = 0;
  b.params.op = ReduceOp::kMax;  // broadcast has no op: not compared
  EXPECT_EQ(validate({a, b}).code, Code::kOk);
}

// Note [Negotiated shapes]: equal counts, different shapes, fail by name.
TEST(Validate, ShapesAreComparedInFullAndNamedPerRank) {
  Request a = req("x", 6), b = req("x", 6);
  a.params.shapes = {2, 2, 3};
  b.params.shapes = {2, 3, 2};
  Response r = validate({a, b});
  EXPECT_EQ(r.code, Code::kMismatch);
  EXPECT_NE(r.message.find("tensor 'x': ranks disagree on shape: [2, 3] on rank 0; [3, 2] on rank 1"),
            std::string::npos)
      << r.message;
  b.params.shapes = {1, 6};  // another ndim
  EXPECT_EQ(validate({a, b}).code, Code::kMismatch);
  b.params.shapes = {};  // a shaped and an unshaped submission mismatch
  r = validate({a, b});
  EXPECT_EQ(r.code, Code::kMismatch);
  EXPECT_NE(r.message.find("(no shape) on rank 1"), std::string::npos) << r.message;
  b.params.shapes = a.params.shapes;
  EXPECT_EQ(validate({a, b, std::nullopt}).code, Code::kOk);  // a joined rank has none
}

// kolo_allgather_into: the rows are part of what ranks agree on, and so is
// whose output it is; a plain allgather's rows may still differ.
TEST(Validate, AnAllgatherIntoTheCallersOutputNeedsTheSameRowsEverywhere) {
  auto gather = [](int64_t rows, bool into) {
    Request r = req("g", rows * 3);
    r.params.collective = Collective::kAllgather;
    r.params.row_count = 3;
    r.params.into = into;
    return r;
  };
  Response ok = validate({gather(2, true), gather(2, true)});
  EXPECT_EQ(ok.code, Code::kOk) << ok.message;
  EXPECT_EQ(ok.rows_per_rank, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(validate({gather(2, false), gather(5, false)}).code, Code::kOk);
  Response rows = validate({gather(2, true), gather(5, true)});
  EXPECT_EQ(rows.code, Code::kMismatch);
  EXPECT_NE(rows.message.find("output: the caller's, for 2 rows from every rank on rank 0"),
            std::string::npos)
      << rows.message;
  EXPECT_NE(rows.message.find("for 5 rows from every rank on rank 1"), std::string::npos)
      << rows.message;
  Response mixed = validate({gather(2, true), gather(2, false)});
  EXPECT_EQ(mixed.code, Code::kMismatch);
  EXPECT_NE(mixed.message.find("kolo's on rank 1"), std::string::npos) << mixed.message;
}

TEST(Validate, AllgatherShapesMayDifferInTheirFirstDimensionOnly) {
  auto gather = [](std::vector<int64_t> shapes, int64_t rows, int64_t row_count) {
    Request r = req("g", rows * row_count);
    r.params.collective = Collective::kAllgather;
    r.params.row_count = row_count;
    r.params.shapes = shapes;
    return std::optional<Request>(r);
  };
  EXPECT_EQ(validate({gather({2, 1, 6}, 1, 6), gather({2, 4, 6}, 4, 6)}).code, Code::kOk);
  Response r = validate({gather({3, 1, 2, 3}, 1, 6), gather({3, 1, 3, 2}, 1, 6)});
  EXPECT_EQ(r.code, Code::kMismatch);
  EXPECT_NE(r.message.find("shape: [1, 2, 3] on rank 0; [1, 3, 2] on rank 1"), std::string::npos)
      << r.message;
}

TEST(Validate, GroupMemberShapesAreCompared) {
  Request a = req("g", 7), b = req("g", 7);
  a.params.collective = b.params.collective = Collective::kGroupedAllreduce;
  a.params.shapes = {1, 4, 0};  // [4], []
  b.params.shapes = {1, 4, 1, 1};
  Response r = validate({a, b});
  EXPECT_EQ(r.code, Code::kMismatch);
  EXPECT_NE(r.message.find("[[4], []] on rank 0; [[4], [1]] on rank 1"), std::string::npos)
      << r.message;
}

// A grouped allgather's response carries every member's rows from every rank,
// member-major; its members' row sizes must agree, their rows need not.
TEST(Validate, GroupedAllgatherCarriesRowsPerMemberAndRank) {
  auto group = [](std::vector<int64_t> counts, std::vector<int64_t> row_counts) {
    Request r = req("g", 0);
    r.params.collective = Collective::kGroupedAllgather;
    r.params.member_counts = counts;
    r.params.member_row_counts = row_counts;
    return std::optional<Request>(r);
  };
  Response r = validate({group({6, 0}, {3, 2}), group({3, 4}, {3, 2}), group({0, 2}, {3, 2})});
  EXPECT_EQ(r.code, Code::kOk) << r.message;
  EXPECT_EQ(r.rows_per_rank, (std::vector<int64_t>{2, 1, 0, 0, 2, 1}));
  r = validate({group({6, 0}, {3, 2}), group({6, 0}, {2, 3})});
  EXPECT_EQ(r.code, Code::kMismatch);
  EXPECT_NE(r.message.find("group member row sizes: [3,2] on rank 0; [2,3] on rank 1"),
            std::string::npos)
      << r.message;
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

// Note [Caching per-rank sizes]: a rank compares with what it sent itself, and
// the response (rank 0's parameters, every rank's rows) is what a hit returns.
TEST(ResponseCache, PerRankSizesCompareThisRanksOwnRequest) {
  ResponseCache cache(4);
  Response agreed = ok_response("g", 6);  // rank 0 sent 6 elements
  agreed.params.collective = Collective::kAllgather;
  agreed.rows_per_rank = {6, 2};
  Request mine = req("g", 2);  // this rank sent 2
  mine.params.collective = Collective::kAllgather;
  std::optional<uint32_t> evicted;
  cache.put(agreed, &evicted, &mine.params);
  uint32_t bit = 99;
  EXPECT_EQ(cache.lookup(mine, &bit), ResponseCache::Lookup::kHit);
  EXPECT_EQ(cache.at(bit).rows_per_rank, (std::vector<int64_t>{6, 2}));
  EXPECT_EQ(cache.at(bit).params.count, 6);
  Request rank0s = mine;
  rank0s.params.count = 6;
  EXPECT_EQ(cache.lookup(rank0s, &bit), ResponseCache::Lookup::kStale);
}

TEST(ResponseCache, EvictsLeastRecentlyTouchedAndReusesLowestBit) {
  ResponseCache cache(3);
  std::optional<uint32_t> evicted;
  EXPECT_EQ(cache.high_water(), 0u);
  for (const char* n : {"a", "b", "c"}) cache.put(ok_response(n), &evicted);
  EXPECT_EQ(cache.high_water(), 3u);  // Note [An AND as long as the cache in use]
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
  EXPECT_EQ(cache.high_water(), 3u);  // bits are reused: the mark does not move
}

TEST(ResponseCache, CapacityZeroCachesNothing) {
  ResponseCache cache(0);
  std::optional<uint32_t> evicted;
  cache.put(ok_response("a"), &evicted);
  uint32_t bit;
  EXPECT_EQ(cache.lookup(req("a"), &bit), ResponseCache::Lookup::kMiss);
  EXPECT_EQ(cache.high_water(), 0u);
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
  EXPECT_EQ(a.high_water(), b.high_water());
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
  EXPECT_TRUE(table.add(2, req("x"), now).empty());
  EXPECT_TRUE(table.add(0, req("x"), now).empty());
  EXPECT_TRUE(table.add(0, req("x"), now).empty());  // a repeat does not count twice
  auto r = table.add(1, req("x"), now);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].code, Code::kOk);
  EXPECT_EQ(table.pending(), 0u);
}

Request of(Collective c, const std::string& name) {
  Request r = req(name);
  r.params.collective = c;
  return r;
}

// Note [Join]: joined ranks count as having submitted allreduces; other collectives
// fail; the last join completes everyone's join with its rank.
TEST(MessageTable, JoinReleasesAllreducesAndFailsOtherCollectives) {
  MessageTable table(3);
  auto now = MessageTable::Clock::now();
  EXPECT_TRUE(table.add(0, req("grad"), now).empty());
  EXPECT_TRUE(table.add(0, of(Collective::kBroadcast, "bcast"), now).empty());
  EXPECT_TRUE(table.add(1, req("grad"), now).empty());
  auto released = table.add(2, of(Collective::kJoin, "kolo.join"), now);
  ASSERT_EQ(released.size(), 2u);  // map order: "bcast" < "grad"
  EXPECT_EQ(released[0].name, "bcast");
  EXPECT_EQ(released[0].code, Code::kInvalidArgument);
  EXPECT_NE(released[0].message.find("rank 2 joined"), std::string::npos) << released[0].message;
  EXPECT_EQ(released[1].name, "grad");
  EXPECT_EQ(released[1].code, Code::kOk);
  // While rank 2 is joined: allreduces from the others complete, others fail at once.
  EXPECT_TRUE(table.add(1, req("next"), now).empty());
  ASSERT_EQ(table.add(0, req("next"), now).size(), 1u);
  auto refused = table.add(0, of(Collective::kAllgather, "gather"), now);
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_EQ(refused[0].code, Code::kInvalidArgument);
  EXPECT_TRUE(table.add(0, of(Collective::kJoin, "kolo.join"), now).empty());
  auto done = table.add(1, of(Collective::kJoin, "kolo.join"), now);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].code, Code::kOk);
  EXPECT_EQ(done[0].last_joined, 1);
  // Joined state is cleared: an allreduce waits for everyone again.
  EXPECT_TRUE(table.add(0, req("after"), now).empty());
  EXPECT_TRUE(table.add(1, req("after"), now).empty());
  EXPECT_EQ(table.add(2, req("after"), now).size(), 1u);
}

TEST(Validate, AllgatherAndAlltoallCarryEveryRanksSizes) {
  auto gather = [](int64_t rows) {
    Request r = of(Collective::kAllgather, "g");
    r.params.row_count = 3;
    r.params.count = rows * 3;
    return std::optional<Request>(r);
  };
  Response r = validate({gather(2), gather(0), gather(5)});
  EXPECT_EQ(r.code, Code::kOk);
  EXPECT_EQ(r.rows_per_rank, (std::vector<int64_t>{2, 0, 5}));
  auto bad = gather(1);
  bad->params.row_count = 4;
  r = validate({gather(2), bad});
  EXPECT_EQ(r.code, Code::kMismatch);
  EXPECT_NE(r.message.find("trailing dimensions"), std::string::npos) << r.message;
  auto a2a = [](std::vector<int64_t> splits) {
    Request r = of(Collective::kAlltoall, "a");
    r.params.send_rows = splits;
    r.params.count = splits[0] + splits[1];
    return std::optional<Request>(r);
  };
  r = validate({a2a({1, 2}), a2a({3, 4})});
  EXPECT_EQ(r.rows_matrix, (std::vector<int64_t>{1, 2, 3, 4}));
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
