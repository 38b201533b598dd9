// kolo.hpp's process sets, options and grouped collectives under mpiexec (2..4
// ranks): a C++ program's view of what kolo.h's *_ex calls, kolo_process_set_* and
// the grouped allgather/reducescatter do. Every expected value is exact.
//
// The set used is {0} at 2 ranks and {0, 2} at 3 and 4 (never the global set,
// which cannot be added twice), so a rank outside the set is always there.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "kolo/kolo.hpp"
#include "multirank/api/api_fixture.h"

namespace kolo_test {
namespace {

const ::testing::Environment* const kMpi = ::testing::AddGlobalTestEnvironment(new MpiEnvironment);

class CppApi : public KoloTest {
 protected:
  void SetUp() override {
    // Every set's runtime pre-faults its own fusion buffer; 4 MiB keeps setup quick.
    setenv("KOLO_FUSION_THRESHOLD", "4M", 1);
    KoloTest::SetUp();
    members_ = size_ == 2 ? std::vector<int>{0} : std::vector<int>{2, 0};
  }
  // The set's members, ascending.
  std::vector<int> sorted_members() const {
    return size_ == 2 ? std::vector<int>{0} : std::vector<int>{0, 2};
  }

  std::vector<int> members_;
};

TEST_F(CppApi, ProcessSetQueriesAndCollectivesInTheSet) {
  const kolo::ProcessSet set = kolo::add_process_set(members_);
  ASSERT_GT(set.id(), 0);
  const std::vector<int> sorted = sorted_members();
  const int set_size = static_cast<int>(sorted.size());
  const bool in_set = rank_ == 0 || rank_ == 2;
  EXPECT_EQ(set.ranks(), sorted);
  EXPECT_EQ(set.size(), set_size);
  EXPECT_EQ(set.included(), in_set);
  EXPECT_EQ(set.rank(), in_set ? rank_ / 2 : -1);
  EXPECT_EQ(kolo::ProcessSet().size(), size_);  // the global set

  if (in_set) {
    // Allreduce: the set's members only, (rank + 1) each.
    std::vector<std::int64_t> x(5, rank_ + 1);
    kolo::allreduce_async("sum", x.data(), x.data(), 5, KOLO_OP_SUM, 1.0, 1.0,
                          kolo::cpu_device(), set.options())
        .wait_or_throw();
    std::int64_t want = 0;
    for (int r : sorted) want += r + 1;
    for (std::int64_t v : x) EXPECT_EQ(v, want);

    // Allgather with uneven rows (member i of the set gives i + 1 rows of value
    // rank): splits() has the set's size values, not the world's.
    const int me = set.rank();
    std::vector<std::int32_t> rows(static_cast<size_t>(me + 1), rank_);
    kolo::Handle g = kolo::allgather_async("gather", rows.data(), me + 1, 1, kolo::cpu_device(),
                                           set.options());
    g.wait_or_throw();
    std::vector<std::int64_t> want_splits;
    std::vector<std::int32_t> want_rows;
    for (int i = 0; i < set_size; ++i) {
      want_splits.push_back(i + 1);
      want_rows.insert(want_rows.end(), static_cast<size_t>(i + 1), sorted[i]);
    }
    EXPECT_EQ(g.splits(), want_splits);
    EXPECT_EQ(g.output<std::int32_t>(), want_rows);

    // Alltoall with one split per member of the set: one row to each.
    std::vector<std::int64_t> send(static_cast<size_t>(set_size), 1);
    std::vector<float> mine(static_cast<size_t>(set_size), static_cast<float>(rank_));
    kolo::Handle a = kolo::alltoall_async("a2a", mine.data(), set_size, &send, 1,
                                          kolo::cpu_device(), set.options());
    a.wait_or_throw();
    EXPECT_EQ(a.splits(), std::vector<std::int64_t>(static_cast<size_t>(set_size), 1));
    std::vector<float> got_rows;
    for (int r : sorted) got_rows.push_back(static_cast<float>(r));
    EXPECT_EQ(a.output<float>(), got_rows);

    // Broadcast from the set's last member, a global rank.
    std::vector<double> b(3, rank_ == sorted.back() ? 7.5 : 0.0);
    kolo::broadcast_async("bcast", b.data(), b.data(), 3, sorted.back(), kolo::cpu_device(),
                          set.options())
        .wait_or_throw();
    EXPECT_EQ(b, std::vector<double>(3, 7.5));
    kolo::barrier(set.options());
  } else {
    // Outside the set: refused with a message, nothing enqueued.
    std::vector<float> x(2, 1.0f);
    kolo::Handle h;
    EXPECT_EQ(kolo::allreduce_async("sum", x.data(), x.data(), 2, &h, KOLO_OP_SUM, 1.0, 1.0,
                                    kolo::cpu_device(), set.options()),
              KOLO_ERR_INVALID_ARGUMENT);
    EXPECT_FALSE(h);
    EXPECT_NE(std::string(kolo_last_error()).find("does not include rank " + std::to_string(rank_)), std::string::npos)
        << kolo_last_error();
  }
  kolo::barrier();
  kolo::remove_process_set(set);
  EXPECT_EQ(set.size(), -1);
  try {
    kolo::remove_process_set(set);
    ADD_FAILURE() << "removing a removed set did not throw";
  } catch (const kolo::Error& e) {
    EXPECT_EQ(e.code(), KOLO_ERR_INVALID_ARGUMENT) << e.what();
  }
}

// kolo::allreduce blocks: in a process set (the set's runtime takes the call),
// in the global set, and a mismatch throws Error on every rank.
TEST_F(CppApi, TheBlockingAllreduceInASetAndItsErrors) {
  const kolo::ProcessSet set = kolo::add_process_set(members_);
  if (set.included()) {
    std::vector<std::int64_t> x(5, rank_ + 1);
    for (int repeat = 0; repeat < 3; ++repeat)
      kolo::allreduce("blocking_in_set", x.data(), x.data(), 5, KOLO_OP_MAX, 1.0, 1.0,
                      kolo::cpu_device(), set.options());
    for (std::int64_t v : x) EXPECT_EQ(v, sorted_members().back() + 1);
  }
  std::vector<double> y(4, 1.0);
  kolo::allreduce("blocking_global", y.data(), y.data(), 4);
  EXPECT_EQ(y, std::vector<double>(4, static_cast<double>(size_)));
  try {
    kolo::allreduce("blocking_mismatch", y.data(), y.data(), rank_ == 0 ? 3 : 4);
    ADD_FAILURE() << "no error for a count that differs on rank 0";
  } catch (const kolo::Error& e) {
    EXPECT_EQ(e.code(), KOLO_ERR_MISMATCH) << e.what();
    EXPECT_NE(std::string(e.what()).find("blocking_mismatch"), std::string::npos) << e.what();
  }
  kolo::barrier();  // every member is done with the set before it goes
  kolo::remove_process_set(set);
}

TEST_F(CppApi, ShapesAreNegotiatedAndTheirNumberChecked) {
  std::vector<float> x(6, 1.0f);
  kolo::Options agreed;
  agreed.shapes = {{2, 3}};
  kolo::allreduce_async("agreed", x.data(), x.data(), 6, KOLO_OP_SUM, 1.0, 1.0,
                        kolo::cpu_device(), agreed)
      .wait_or_throw();
  EXPECT_EQ(x, std::vector<float>(6, static_cast<float>(size_)));

  // Equal counts, different shapes: KOLO_ERR_MISMATCH on every rank, naming both.
  kolo::Options differ;
  differ.shapes = {rank_ == 0 ? kolo::Shape{2, 3} : kolo::Shape{3, 2}};
  kolo::Handle h = kolo::allreduce_async("differ", x.data(), x.data(), 6, KOLO_OP_SUM, 1.0, 1.0,
                                         kolo::cpu_device(), differ);
  EXPECT_EQ(h.wait(120.0), KOLO_ERR_MISMATCH);
  EXPECT_NE(h.message().find("[2, 3] on rank 0"), std::string::npos) << h.message();
  EXPECT_NE(h.message().find("[3, 2] on rank"), std::string::npos) << h.message();

  // Two shapes for one tensor: refused before anything is enqueued, in both forms.
  kolo::Options two;
  two.shapes = {{6}, {6}};
  kolo::Handle none;
  EXPECT_EQ(kolo::allreduce_async("two", x.data(), x.data(), 6, &none, KOLO_OP_SUM, 1.0, 1.0,
                                  kolo::cpu_device(), two),
            KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_FALSE(none);
  try {
    kolo::allgather_async("two", x.data(), 6, 1, kolo::cpu_device(), two);
    ADD_FAILURE() << "two shapes for one tensor did not throw";
  } catch (const kolo::Error& e) {
    EXPECT_EQ(e.code(), KOLO_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("2 shapes for 1 tensors"), std::string::npos) << e.what();
  }
  kolo::barrier();
}

TEST_F(CppApi, GroupedAllgatherAndReducescatter) {
  // Member 0: rank r gives r + 1 rows of 2 elements (value 10 r + row); member 1:
  // one row of 1 element (value -r).
  std::vector<std::int32_t> m0, m1{-rank_};
  for (int row = 0; row <= rank_; ++row) m0.insert(m0.end(), 2, 10 * rank_ + row);
  kolo::Handle g = kolo::grouped_allgather_async<std::int32_t>(
      {"g.0", "g.1"}, {m0.data(), m1.data()}, {rank_ + 1, 1}, {2, 1});
  g.wait_or_throw();
  std::vector<std::int32_t> want;
  std::vector<std::int64_t> splits;
  for (int r = 0; r < size_; ++r) {
    for (int row = 0; row <= r; ++row) want.insert(want.end(), 2, 10 * r + row);
    splits.push_back(r + 1);
  }
  for (int r = 0; r < size_; ++r) {
    want.push_back(-r);
    splits.push_back(1);
  }
  EXPECT_EQ(g.output<std::int32_t>(), want);
  EXPECT_EQ(g.splits(), splits);  // member-major, 2 * size values

  // Reducescatter of 2 members: 5 rows and size rows, rank r gives (r + 1) * (i + 1).
  const std::int64_t rows0 = 5, rows1 = size_;
  std::vector<std::int64_t> in0(rows0), in1(rows1);
  for (std::int64_t i = 0; i < rows0; ++i) in0[i] = (rank_ + 1) * (i + 1);
  for (std::int64_t i = 0; i < rows1; ++i) in1[i] = (rank_ + 1) * (i + 1);
  const std::int64_t shard0 = kolo::reducescatter_shard_rows(rows0, rank_, size_);
  std::vector<std::int64_t> out0(static_cast<size_t>(shard0), -1), out1(1, -1);
  kolo::grouped_reducescatter_async<std::int64_t>({"r.0", "r.1"}, {in0.data(), in1.data()},
                                                  {out0.data(), out1.data()}, {rows0, rows1})
      .wait_or_throw();
  const std::int64_t ranks_sum = size_ * (size_ + 1) / 2;
  std::int64_t first = 0;
  for (int r = 0; r < rank_; ++r) first += kolo::reducescatter_shard_rows(rows0, r, size_);
  for (std::int64_t i = 0; i < shard0; ++i) EXPECT_EQ(out0[i], ranks_sum * (first + i + 1));
  EXPECT_EQ(out1[0], ranks_sum * (rank_ + 1));

  // Vectors of different sizes: refused, nothing enqueued.
  kolo::Handle none;
  EXPECT_EQ(kolo::grouped_allgather_async<std::int32_t>({"x"}, {m0.data(), m1.data()}, {1},
                                                        &none),
            KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_FALSE(none);
}

}  // namespace
}  // namespace kolo_test
