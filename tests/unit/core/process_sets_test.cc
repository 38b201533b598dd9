// Process sets through the coordinator, ranks as threads over the loopback
// transport: each set negotiates on its own (Note [A process set is a world]) —
// overlapping and disjoint sets, one name in two sets at once, a stall in one set
// while another goes on, add and remove while other work runs, and every error
// the table reports alike on every rank.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "core/process_sets.h"
#include "loopback_job.h"

namespace kolo::core {
namespace {

using testing::LoopbackJob;
using testing::submit_args;
using testing::wait_code;

CollectiveArgs allreduce(const std::string& name, const int32_t* in, int32_t* out, int64_t count,
                         int32_t set) {
  CollectiveArgs a;
  a.collective = Collective::kAllreduce;
  a.name = name;
  a.input = in;
  a.output = out;
  a.rows = count;
  a.dtype = DataType::kInt32;
  a.process_set = set;
  return a;
}

int32_t add_set(Runtime& rt, std::vector<int> ranks, Code expect = Code::kOk,
                const std::string& local_error = "") {
  int32_t id = -1;
  Status s = rt.process_sets()->add(std::move(ranks), local_error, &id);
  EXPECT_EQ(s.code(), expect) << s.to_string();
  return id;
}

// Sum over `ranks` of (rank + 1) * (i + 1): exact in int32.
int32_t expected(const std::vector<int>& ranks, int i) {
  int32_t sum = 0;
  for (int r : ranks) sum += (r + 1) * (i + 1);
  return sum;
}

// Every rank of the set allreduces `name` in it; checks the exact sums.
void allreduce_in(Runtime& rt, int rank, int32_t id, const std::vector<int>& ranks,
                  const std::string& name, int count) {
  std::vector<int32_t> in(count), out(count, -1);
  for (int i = 0; i < count; ++i) in[i] = (rank + 1) * (i + 1);
  auto h = submit_args(rt, allreduce(name, in.data(), out.data(), count, id));
  ASSERT_EQ(wait_code(h), Code::kOk) << h->message();
  for (int i = 0; i < count; ++i) ASSERT_EQ(out[i], expected(ranks, i)) << name << " i=" << i;
}

// Every set's runtime pre-faults a fusion buffer; 1 MiB keeps these jobs quick.
Config small() {
  Config c;
  c.fusion_threshold_bytes = 1 << 20;
  return c;
}

bool member(const std::vector<int>& ranks, int rank) {
  return std::find(ranks.begin(), ranks.end(), rank) != ranks.end();
}

TEST(ProcessSets, OverlappingAndDisjointSetsReduceTheirOwnMembersAtEverySize) {
  for (int size = 1; size <= 8; ++size) {
    std::vector<int> evens, odds, low;
    for (int r = 0; r < size; ++r) (r % 2 ? odds : evens).push_back(r);
    for (int r = 0; r < (size + 1) / 2; ++r) low.push_back(r);
    const bool distinct_low = low != evens && static_cast<int>(low.size()) < size;
    LoopbackJob job(size, small());
    job.run([&](int rank, Runtime& rt) {
      // A set of every rank is the global set (adding it again is refused).
      const int32_t e = size == 1 ? 0 : add_set(rt, evens);
      const int32_t o = odds.empty() ? -1 : add_set(rt, odds);
      const int32_t l = distinct_low ? add_set(rt, low) : -1;
      EXPECT_EQ(e, size == 1 ? 0 : 1);
      // The same name in three sets (and the global one) at once.
      std::vector<std::thread> ops;
      if (e > 0 && member(evens, rank)) ops.emplace_back([&] { allreduce_in(rt, rank, e, evens, "x", 7); });
      if (member(odds, rank)) ops.emplace_back([&] { allreduce_in(rt, rank, o, odds, "x", 7); });
      if (l > 0 && member(low, rank))
        ops.emplace_back([&] { allreduce_in(rt, rank, l, low, "x", 1000); });
      std::vector<int> all;
      for (int r = 0; r < size; ++r) all.push_back(r);
      ops.emplace_back([&] { allreduce_in(rt, rank, 0, all, "x", 3); });
      for (auto& t : ops) t.join();
    });
  }
}

TEST(ProcessSets, AStallInOneSetDoesNotHoldUpAnother) {
  LoopbackJob job(4, small());
  // Rank 1 sends "s" only after both others have seen it still pending: rank 0
  // may finish its steps before rank 2 has looked.
  std::atomic<int> seen_pending{0};
  job.run([&](int rank, Runtime& rt) {
    const std::vector<int> a = {0, 1, 2}, b = {0, 2};
    const int32_t ia = add_set(rt, a);
    const int32_t ib = add_set(rt, b);
    std::vector<int32_t> in(4, rank + 1), out(4, 0);
    std::shared_ptr<HandleState> stalled;
    // Rank 1 holds back "s" in set a; ranks 0 and 2 go on in set b meanwhile.
    if (rank == 0 || rank == 2) stalled = submit_args(rt, allreduce("s", in.data(), out.data(), 4, ia));
    if (member(b, rank)) {
      for (int step = 0; step < 20; ++step)
        allreduce_in(rt, rank, ib, b, "step." + std::to_string(step), 5);
      EXPECT_FALSE(stalled->done());
      ++seen_pending;
    }
    if (rank == 1) {
      while (seen_pending < 2) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      stalled = submit_args(rt, allreduce("s", in.data(), out.data(), 4, ia));
    }
    if (stalled) {
      ASSERT_EQ(wait_code(stalled), Code::kOk) << stalled->message();
      EXPECT_EQ(out[0], 1 + 2 + 3);
    }
  });
}

TEST(ProcessSets, AddAndRemoveWhileTheGlobalSetWorks) {
  LoopbackJob job(4, small());
  job.run([&](int rank, Runtime& rt) {
    std::atomic<bool> stop{false};
    std::thread busy([&] {
      std::vector<int> all = {0, 1, 2, 3};
      for (int step = 0; step < 30; ++step)
        allreduce_in(rt, rank, 0, all, "global." + std::to_string(step), 16);
    });
    for (int round = 0; round < 3; ++round) {
      const std::vector<int> set = {round % 4, (round + 2) % 4};
      const int32_t id = add_set(rt, set);
      EXPECT_EQ(id, round + 1);
      std::vector<int> sorted = set;
      std::sort(sorted.begin(), sorted.end());
      if (member(set, rank)) allreduce_in(rt, rank, id, sorted, "in.set", 33);
      EXPECT_TRUE(rt.process_sets()->remove(id).ok());
      std::shared_ptr<const ProcessSet> gone;
      EXPECT_EQ(rt.process_sets()->find(id, &gone).code(), Code::kInvalidArgument);
    }
    busy.join();
  });
}

TEST(ProcessSets, ErrorsAreReportedOnEveryRankAndTheJobGoesOn) {
  LoopbackJob job(4, small());
  job.run([&](int rank, Runtime& rt) {
    ProcessSets& sets = *rt.process_sets();
    int32_t id = -1;
    // Different members, duplicates, out-of-range ranks, an empty set, a rank
    // whose own arguments were unusable: every rank fails alike.
    Status s = sets.add(rank == 3 ? std::vector<int>{0, 1} : std::vector<int>{0, 2}, "", &id);
    EXPECT_EQ(s.code(), Code::kInvalidArgument);
    EXPECT_NE(s.message().find("ranks list different members"), std::string::npos) << s.message();
    s = sets.add({1, 1}, "", &id);
    EXPECT_NE(s.message().find("names rank 1 twice"), std::string::npos) << s.message();
    s = sets.add({0, 4}, "", &id);
    EXPECT_NE(s.message().find("rank 4 in [0, 4] is not a rank of this job"), std::string::npos)
        << s.message();
    s = sets.add({}, "", &id);
    EXPECT_EQ(s.code(), Code::kInvalidArgument);
    s = sets.add({0, 1}, rank == 2 ? "ranks is NULL" : "", &id);
    EXPECT_EQ(s.code(), Code::kInvalidArgument);
    EXPECT_NE(s.message().find(rank == 2 ? "ranks is NULL" : "rank 2 passed unusable"),
              std::string::npos) << s.message();
    s = sets.add({0, 1, 2, 3}, "", &id);
    EXPECT_NE(s.message().find("process set 0 already has"), std::string::npos) << s.message();
    // None of those took an id.
    const int32_t good = add_set(rt, {2, 0});
    EXPECT_EQ(good, 1);
    std::vector<int32_t> in(2, 1), out(2);
    // Unknown id, a rank outside the set, a root outside the set.
    Status refused = rt.submit(allreduce("u", in.data(), out.data(), 2, 7), nullptr);
    EXPECT_EQ(refused.message(), "unknown process set id 7");
    if (rank == 1 || rank == 3) {
      std::shared_ptr<HandleState> h;
      refused = rt.submit(allreduce("n", in.data(), out.data(), 2, good), &h);
      EXPECT_EQ(refused.message(), "process set 1 does not include rank " + std::to_string(rank));
    } else {
      CollectiveArgs b = allreduce("b", in.data(), out.data(), 2, good);
      b.collective = Collective::kBroadcast;
      b.root = 1;
      std::shared_ptr<HandleState> h;
      refused = rt.submit(b, &h);
      EXPECT_EQ(refused.message(), "tensor 'b': broadcast root 1 is not a rank of process set 1");
      b.root = 2;  // a global rank, the set's rank 1
      b.name = "b2";
      in.assign(2, rank * 10);
      h = submit_args(rt, b);
      ASSERT_EQ(wait_code(h), Code::kOk) << h->message();
      EXPECT_EQ(out[0], 20);
    }
    // Removing the global set, different ids, an unknown id, a set with work in flight.
    EXPECT_NE(sets.remove(0).message().find("the global process set (id 0) cannot be removed"),
              std::string::npos);
    s = sets.remove(rank == 0 ? good : 5);
    EXPECT_NE(s.message().find("ranks remove different sets"), std::string::npos) << s.message();
    EXPECT_EQ(sets.remove(9).message(), "kolo_process_set_remove: unknown process set id 9");
    std::shared_ptr<HandleState> held;
    if (rank == 0) held = submit_args(rt, allreduce("held", in.data(), out.data(), 2, good));
    s = sets.remove(good);
    EXPECT_NE(s.message().find("process set 1 has operations in flight on rank 0 (1)"),
              std::string::npos) << s.message();
    if (rank == 2) held = submit_args(rt, allreduce("held", in.data(), out.data(), 2, good));
    if (held) ASSERT_EQ(wait_code(held), Code::kOk) << held->message();
    EXPECT_TRUE(sets.remove(good).ok());
    EXPECT_EQ(sets.remove(good).message(),
              "kolo_process_set_remove: unknown process set id 1 (it was removed)");
    // The job goes on.
    allreduce_in(rt, rank, 0, {0, 1, 2, 3}, "after", 3);
  });
}

}  // namespace
}  // namespace kolo::core
