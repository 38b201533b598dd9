// Process sets through the C API under mpiexec at 3 and 4 ranks, with the sets
// {0,2}, {1,3} and {0,1,2} at 4 ranks; at 3 ranks {0,2}, {1,2} and the global set
// (which has the ranks {0,1,2}: adding it again is refused, as in Horovod), through
// the same _ex calls with process_set 0. Every collective in a set, the same name
// in flight in overlapping sets at once, the queries, and the errors (on every
// rank concerned, nothing enqueued, the job goes on).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <thread>
#include <vector>

#include "multirank/api/api_fixture.h"

namespace kolo_test {
namespace {

const ::testing::Environment* const kMpi = ::testing::AddGlobalTestEnvironment(new MpiEnvironment);

class ProcessSets : public KoloTest {
 protected:
  void SetUp() override {
    // Every set's runtime pre-faults its own fusion buffer; 4 MiB keeps setup quick.
    setenv("KOLO_FUSION_THRESHOLD", "4M", 1);
    KoloTest::SetUp();
    if (size_ < 3) GTEST_SKIP() << "process set tests need 3 or 4 ranks";
    even_ = add({0, 2});
    odd_ = size_ == 4 ? add({3, 1}) : add({2, 1});
    three_ = size_ == 4 ? add({0, 1, 2}) : 0;
  }

  int32_t add(std::vector<int> ranks) {
    int32_t id = -1;
    EXPECT_EQ(kolo_process_set_add(ranks.data(), static_cast<int>(ranks.size()), &id), KOLO_OK)
        << kolo_last_error();
    return id;
  }
  kolo_options_t in(int32_t set) const {
    kolo_options_t o = KOLO_OPTIONS_INIT;
    o.process_set = set;
    return o;
  }
  std::vector<int> members(int32_t set) const {
    std::vector<int> ranks(8);
    int size = 0;
    EXPECT_EQ(kolo_process_set_ranks(set, ranks.data(), 8, &size), KOLO_OK);
    ranks.resize(size);
    return ranks;
  }
  // Allreduces (rank + 1) * (i + 1) over `set`; checks the exact sums.
  void allreduce_in(int32_t set, const char* name, int count) {
    std::vector<int32_t> x(count), y(count, -1);
    for (int i = 0; i < count; ++i) x[i] = (rank_ + 1) * (i + 1);
    const kolo_options_t o = in(set);
    kolo_handle_t h = nullptr;
    ASSERT_EQ(kolo_allreduce_async_ex(name, x.data(), y.data(), count, KOLO_INT32, KOLO_OP_SUM, 1.0,
                                      1.0, cpu(), &o, &h),
              KOLO_OK)
        << kolo_last_error();
    ASSERT_EQ(wait_or_abort(h), KOLO_OK) << kolo_handle_message(h);
    kolo_handle_release(h);
    int32_t members_sum = 0;
    for (int r : members(set)) members_sum += r + 1;
    for (int i = 0; i < count; ++i) ASSERT_EQ(y[i], members_sum * (i + 1)) << name << " " << i;
  }

  int32_t even_ = -1, odd_ = -1, three_ = -1;  // three_: {0,1,2}, the global set at 3 ranks
};

TEST_F(ProcessSets, QueriesAnswerPerSet) {
  EXPECT_EQ(even_, 1);
  EXPECT_EQ(odd_, 2);
  EXPECT_EQ(three_, size_ == 4 ? 3 : 0);
  EXPECT_EQ(kolo_process_set_size(0), size_);
  EXPECT_EQ(kolo_process_set_rank(0), rank_);
  EXPECT_EQ(kolo_process_set_size(even_), 2);
  EXPECT_EQ(kolo_process_set_included(even_), rank_ % 2 == 0 ? 1 : 0);
  EXPECT_EQ(kolo_process_set_rank(even_), rank_ % 2 == 0 ? rank_ / 2 : -1);
  EXPECT_EQ(members(three_), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(members(odd_), (std::vector<int>{1, size_ - 1}));
  int32_t again = -1;
  const int all[] = {0, 1, 2};
  EXPECT_EQ(kolo_process_set_add(all, 3, &again), KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kolo_last_error()).find("already has the ranks [0, 1, 2]"), std::string::npos)
      << kolo_last_error();
  EXPECT_EQ(kolo_process_set_size(42), -1);
  EXPECT_STREQ(kolo_last_error(), "unknown process set id 42");
}

TEST_F(ProcessSets, OneNameInFlightInOverlappingSetsAtOnce) {
  std::vector<std::thread> ops;
  if (rank_ % 2 == 0) ops.emplace_back([&] { allreduce_in(even_, "grad", 1000); });
  if (kolo_process_set_included(odd_) == 1)
    ops.emplace_back([&] { allreduce_in(odd_, "grad", 1000); });
  if (three_ != 0 && rank_ < 3) ops.emplace_back([&] { allreduce_in(three_, "grad", 70000); });
  ops.emplace_back([&] { allreduce_in(0, "grad", 5); });
  for (auto& t : ops) t.join();
}

TEST_F(ProcessSets, EveryCollectiveInASet) {
  if (rank_ >= 3) {  // outside {0,1,2}: refused here, nothing enqueued
    const kolo_options_t o = in(three_);
    kolo_handle_t h = nullptr;
    int32_t x = 0;
    EXPECT_EQ(kolo_allgather_async_ex("g", &x, 1, 1, KOLO_INT32, cpu(), &o, &h),
              KOLO_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(std::string(kolo_last_error()), "process set " + std::to_string(three_) +
                                                  " does not include rank 3");
    EXPECT_EQ(h, nullptr);
    EXPECT_EQ(kolo_barrier_ex(&o), KOLO_ERR_INVALID_ARGUMENT);
    return;
  }
  const kolo_options_t o = in(three_);
  const int me = kolo_process_set_rank(three_);
  // Allgather: rank r of the set gives r + 1 rows.
  std::vector<int32_t> rows(me + 1, 10 * me);
  kolo_handle_t h = nullptr;
  ASSERT_EQ(kolo_allgather_async_ex("g", rows.data(), me + 1, 1, KOLO_INT32, cpu(), &o, &h), KOLO_OK);
  ASSERT_EQ(wait_or_abort(h), KOLO_OK) << kolo_handle_message(h);
  const void* data = nullptr;
  int64_t bytes = 0;
  ASSERT_EQ(kolo_handle_output(h, &data, &bytes), KOLO_OK);
  EXPECT_EQ(std::vector<int32_t>(static_cast<const int32_t*>(data),
                                 static_cast<const int32_t*>(data) + bytes / 4),
            (std::vector<int32_t>{0, 10, 10, 20, 20, 20}));
  kolo_handle_release(h);
  // Broadcast from global rank 2 (the set's rank 2).
  int32_t b = rank_ == 2 ? 77 : 0;
  ASSERT_EQ(kolo_broadcast_async_ex("b", &b, &b, 1, KOLO_INT32, 2, cpu(), &o, &h), KOLO_OK);
  ASSERT_EQ(wait_or_abort(h), KOLO_OK) << kolo_handle_message(h);
  kolo_handle_release(h);
  EXPECT_EQ(b, 77);
  // Alltoall, even: one row to each member.
  std::vector<int32_t> send = {me * 10 + 0, me * 10 + 1, me * 10 + 2};
  ASSERT_EQ(kolo_alltoall_async_ex("a", send.data(), 3, 1, nullptr, KOLO_INT32, cpu(), &o, &h),
            KOLO_OK);
  ASSERT_EQ(wait_or_abort(h), KOLO_OK) << kolo_handle_message(h);
  ASSERT_EQ(kolo_handle_output(h, &data, &bytes), KOLO_OK);
  ASSERT_EQ(bytes, 12);
  for (int src = 0; src < 3; ++src) EXPECT_EQ(static_cast<const int32_t*>(data)[src], src * 10 + me);
  kolo_handle_release(h);
  // Reducescatter: 3 rows, one per member.
  std::vector<int32_t> rs = {1, 2, 3};
  int32_t shard = 0;
  ASSERT_EQ(kolo_reducescatter_async_ex("r", rs.data(), &shard, 3, 1, KOLO_INT32, KOLO_OP_SUM, 1.0,
                                        1.0, cpu(), &o, &h),
            KOLO_OK);
  ASSERT_EQ(wait_or_abort(h), KOLO_OK) << kolo_handle_message(h);
  kolo_handle_release(h);
  EXPECT_EQ(shard, 3 * (me + 1));
  // Grouped allreduce and a barrier.
  int32_t g1 = 1, g2 = 2, o1 = 0, o2 = 0;
  const char* names[] = {"g1", "g2"};
  const void* ins[] = {&g1, &g2};
  void* outs[] = {&o1, &o2};
  const int64_t counts[] = {1, 1};
  ASSERT_EQ(kolo_grouped_allreduce_async_ex(2, names, ins, outs, counts, KOLO_INT32, KOLO_OP_SUM,
                                            1.0, 1.0, cpu(), &o, &h),
            KOLO_OK);
  ASSERT_EQ(wait_or_abort(h), KOLO_OK) << kolo_handle_message(h);
  kolo_handle_release(h);
  EXPECT_EQ(o1 + o2, 9);
  EXPECT_EQ(kolo_barrier_ex(&o), KOLO_OK) << kolo_last_error();
}

// The blocking forms in a set, three times each (the repeats are cached and go
// alone in the set's own runtime): a broadcast's root is a global rank, an
// allgather into the caller's output holds the set's rows, and a rank outside the
// set is refused at once, with no handle.
TEST_F(ProcessSets, BlockingCollectivesInASet) {
  const kolo_options_t o = in(even_);  // {0, 2}
  if (rank_ != 0 && rank_ != 2) {
    int32_t x = 5;
    kolo_handle_t h = reinterpret_cast<kolo_handle_t>(&x);
    EXPECT_EQ(kolo_allgather_ex("bg", &x, 1, 1, KOLO_INT32, cpu(), &o, &h),
              KOLO_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(h, nullptr);
    EXPECT_EQ(kolo_broadcast_ex("bb", &x, &x, 1, KOLO_INT32, 2, cpu(), &o),
              KOLO_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(x, 5);
    return;
  }
  const int me = kolo_process_set_rank(even_);
  for (int repeat = 0; repeat < 3; ++repeat) {
    int32_t b = rank_ == 2 ? 40 + repeat : -1;
    ASSERT_EQ(kolo_broadcast_ex("bb", &b, &b, 1, KOLO_INT32, 2, cpu(), &o), KOLO_OK)
        << kolo_last_error();
    EXPECT_EQ(b, 40 + repeat);
    std::vector<int32_t> rs = {1 + repeat, 2, 3, 4 + rank_};
    std::vector<int32_t> shard(2, -1);
    ASSERT_EQ(kolo_reducescatter_ex("br", rs.data(), shard.data(), 4, 1, KOLO_INT32, KOLO_OP_SUM,
                                    1.0, 1.0, cpu(), &o),
              KOLO_OK)
        << kolo_last_error();
    EXPECT_EQ(shard, me == 0 ? (std::vector<int32_t>{2 + 2 * repeat, 4})
                             : (std::vector<int32_t>{6, 10}));
    int32_t x = 10 * rank_ + repeat;
    kolo_handle_t h = nullptr;
    ASSERT_EQ(kolo_allgather_ex("bg", &x, 1, 1, KOLO_INT32, cpu(), &o, &h), KOLO_OK)
        << kolo_last_error();
    const void* data = nullptr;
    int64_t bytes = 0;
    ASSERT_EQ(kolo_handle_output(h, &data, &bytes), KOLO_OK);
    EXPECT_EQ(std::vector<int32_t>(static_cast<const int32_t*>(data),
                                   static_cast<const int32_t*>(data) + bytes / 4),
              (std::vector<int32_t>{repeat, 20 + repeat}));
    kolo_handle_release(h);
    // Into the caller's output: the set's two ranks' rows, not the world's.
    std::vector<int32_t> into(5, -1);
    const int32_t pair[2] = {rank_, repeat};
    ASSERT_EQ(kolo_allgather_into_ex("bi", pair, into.data(), 1, 2, KOLO_INT32, cpu(), &o),
              KOLO_OK)
        << kolo_last_error();
    EXPECT_EQ(into, (std::vector<int32_t>{0, repeat, 2, repeat, -1}));
    std::vector<int32_t> send = {100 * rank_, 100 * rank_ + 1};
    ASSERT_EQ(kolo_alltoall_ex("ba", send.data(), 2, 1, nullptr, KOLO_INT32, cpu(), &o, &h),
              KOLO_OK)
        << kolo_last_error();
    ASSERT_EQ(kolo_handle_output(h, &data, &bytes), KOLO_OK);
    EXPECT_EQ(std::vector<int32_t>(static_cast<const int32_t*>(data),
                                   static_cast<const int32_t*>(data) + bytes / 4),
              (std::vector<int32_t>{me, 200 + me}));
    kolo_handle_release(h);
  }
}

TEST_F(ProcessSets, ErrorsOnEveryRankAndTheJobGoesOn) {
  // Ranks listing different members.
  std::vector<int> mine = rank_ == 1 ? std::vector<int>{0, 1} : std::vector<int>{0, 2};
  int32_t id = -1;
  EXPECT_EQ(kolo_process_set_add(mine.data(), 2, &id), KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kolo_last_error()).find("ranks list different members"), std::string::npos)
      << kolo_last_error();
  int dup[] = {1, 1};
  EXPECT_EQ(kolo_process_set_add(dup, 2, &id), KOLO_ERR_INVALID_ARGUMENT);
  int far[] = {0, 9};
  EXPECT_EQ(kolo_process_set_add(far, 2, &id), KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kolo_last_error()).find("rank 9 in [0, 9] is not a rank of this job"),
            std::string::npos)
      << kolo_last_error();
  EXPECT_EQ(kolo_process_set_remove(0), KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kolo_process_set_remove(99), KOLO_ERR_INVALID_ARGUMENT);
  kolo_options_t bad = in(0);
  bad.flags = 2;
  EXPECT_EQ(kolo_barrier_ex(&bad), KOLO_ERR_INVALID_ARGUMENT);
  // Removing a set with work in flight: rank 0 holds "held" in {0,2}.
  kolo_handle_t held = nullptr;
  int32_t x = 1, y = 0;
  const kolo_options_t o = in(even_);
  if (rank_ == 0)
    ASSERT_EQ(kolo_allreduce_async_ex("held", &x, &y, 1, KOLO_INT32, KOLO_OP_SUM, 1.0, 1.0, cpu(),
                                      &o, &held),
              KOLO_OK);
  EXPECT_EQ(kolo_process_set_remove(even_), KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kolo_last_error()).find("has operations in flight on rank 0 (1)"),
            std::string::npos)
      << kolo_last_error();
  if (rank_ == 2)
    ASSERT_EQ(kolo_allreduce_async_ex("held", &x, &y, 1, KOLO_INT32, KOLO_OP_SUM, 1.0, 1.0, cpu(),
                                      &o, &held),
              KOLO_OK);
  if (held) {
    EXPECT_EQ(wait_or_abort(held), KOLO_OK) << kolo_handle_message(held);
    EXPECT_EQ(y, 2);
    kolo_handle_release(held);
  }
  EXPECT_EQ(kolo_process_set_remove(even_), KOLO_OK) << kolo_last_error();
  EXPECT_EQ(kolo_process_set_included(even_), -1);
  // The job goes on, in the global set and the others.
  allreduce_in(0, "after", 3);
  if (rank_ < 3) allreduce_in(three_, "after", 3);
}

}  // namespace
}  // namespace kolo_test
