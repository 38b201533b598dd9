// kolo_grouped_allgather_async and kolo_grouped_reducescatter_async under
// mpiexec -n 2, 3, 4: exact values for members of uneven and zero sizes, the
// member-major output and splits, the response cache (a group submitted again),
// and a mismatch in one member failing the whole group on every rank.
#include <cstring>
#include <string>
#include <vector>

#include "api_fixture.h"

namespace kolo_test {
namespace {

const ::testing::Environment* const kMpi = ::testing::AddGlobalTestEnvironment(new MpiEnvironment);

class Grouped : public KoloTest {};

// Member m's rows on rank r (zero for some), and element i's value.
int64_t gather_rows(int m, int r) { return m == 0 ? r + 1 : m == 1 ? (r % 2) * 2 : 0; }
int32_t value(int m, int r, int64_t i) { return 1000 * m + 100 * r + static_cast<int32_t>(i); }

TEST_F(Grouped, AllgatherGivesEachMembersRowsInOrderWithMemberMajorSplits) {
  const int64_t row_counts[] = {3, 1, 4};
  std::vector<std::vector<int32_t>> in(3);
  std::vector<const void*> inputs;
  std::vector<int64_t> rows;
  for (int m = 0; m < 3; ++m) {
    for (int64_t i = 0; i < gather_rows(m, rank_) * row_counts[m]; ++i)
      in[m].push_back(value(m, rank_, i));
    inputs.push_back(in[m].data());
    rows.push_back(gather_rows(m, rank_));
  }
  const char* names[] = {"ga.0", "ga.1", "ga.2"};
  for (int round = 0; round < 2; ++round) {  // allgather is never cached: twice the same way
    kolo_handle_t h = nullptr;
    ASSERT_EQ(kolo_grouped_allgather_async(3, names, inputs.data(), rows.data(), row_counts,
                                           KOLO_INT32, cpu(), nullptr, &h),
              KOLO_OK)
        << kolo_last_error();
    ASSERT_EQ(wait_or_abort(h), KOLO_OK) << kolo_handle_message(h);
    std::vector<int32_t> want;
    std::vector<int64_t> want_splits;
    for (int m = 0; m < 3; ++m)
      for (int r = 0; r < size_; ++r) {
        want_splits.push_back(gather_rows(m, r));
        for (int64_t i = 0; i < gather_rows(m, r) * row_counts[m]; ++i) want.push_back(value(m, r, i));
      }
    const void* data = nullptr;
    int64_t bytes = -1;
    ASSERT_EQ(kolo_handle_output(h, &data, &bytes), KOLO_OK);
    ASSERT_EQ(bytes, static_cast<int64_t>(want.size() * sizeof(int32_t)));
    std::vector<int32_t> got(want.size());
    if (bytes > 0) std::memcpy(got.data(), data, static_cast<size_t>(bytes));
    EXPECT_EQ(got, want);
    std::vector<int64_t> splits(want_splits.size(), -1);
    ASSERT_EQ(kolo_handle_splits(h, splits.data(), static_cast<int>(splits.size())), KOLO_OK);
    EXPECT_EQ(splits, want_splits);
    kolo_handle_release(h);
  }
}

// Rows not divisible by the world size, fewer rows than ranks, an empty member;
// SUM, and AVERAGE with a postscale, in int64 (exact). Submitted twice: the second
// time from the response cache.
TEST_F(Grouped, ReducescatterGivesEachMembersShard) {
  const int64_t rows[] = {5, 1, 0}, row_counts[] = {2, 3, 7};
  for (kolo_op_t op : {KOLO_OP_SUM, KOLO_OP_AVERAGE}) {
    for (int round = 0; round < 2; ++round) {
      std::vector<std::vector<int64_t>> in(3), out(3);
      std::vector<const void*> inputs;
      std::vector<void*> outputs;
      for (int m = 0; m < 3; ++m) {
        for (int64_t i = 0; i < rows[m] * row_counts[m]; ++i) in[m].push_back((rank_ + 1) * (i + 10 * m));
        out[m].assign(kolo_reducescatter_shard_rows(rows[m], rank_, size_) * row_counts[m], -1);
        inputs.push_back(in[m].data());
        outputs.push_back(out[m].data());
      }
      const char* names[] = {"rs.0", "rs.1", "rs.2"};
      const double post = op == KOLO_OP_AVERAGE ? 2.0 : 1.0;
      kolo_handle_t h = nullptr;
      ASSERT_EQ(kolo_grouped_reducescatter_async(3, names, inputs.data(), outputs.data(), rows,
                                                 row_counts, KOLO_INT64, op, 1.0, post, cpu(),
                                                 nullptr, &h),
                KOLO_OK)
          << kolo_last_error();
      ASSERT_EQ(wait_or_abort(h), KOLO_OK) << kolo_handle_message(h);
      kolo_handle_release(h);
      const int64_t rank_sum = int64_t(size_) * (size_ + 1) / 2;
      for (int m = 0; m < 3; ++m) {
        int64_t first = 0;  // this rank's shard starts after the shards of lower ranks
        for (int r = 0; r < rank_; ++r) first += kolo_reducescatter_shard_rows(rows[m], r, size_);
        for (size_t k = 0; k < out[m].size(); ++k) {
          const int64_t i = first * row_counts[m] + static_cast<int64_t>(k);
          const int64_t sum = rank_sum * (i + 10 * m);
          ASSERT_EQ(out[m][k], op == KOLO_OP_SUM ? sum : sum * 2 / size_)
              << "member " << m << " element " << k;
        }
      }
    }
  }
}

// One member differs on one rank: the whole group fails on every rank, naming it.
TEST_F(Grouped, AMismatchInOneMemberFailsTheGroupOnEveryRank) {
  std::vector<float> a(12, 1.0f), b(12, 1.0f), sa(12), sb(12);
  const char* names[] = {"mm.0", "mm.1"};
  const void* inputs[] = {a.data(), b.data()};
  void* outputs[] = {sa.data(), sb.data()};
  const int64_t rows[] = {2, rank_ == 0 ? 2 : 3};
  const int64_t row_counts[] = {3, rank_ == 0 ? 3 : 2};
  kolo_handle_t h = nullptr;
  ASSERT_EQ(kolo_grouped_reducescatter_async(2, names, inputs, outputs, rows, row_counts,
                                             KOLO_FLOAT32, KOLO_OP_SUM, 1.0, 1.0, cpu(), nullptr,
                                             &h),
            KOLO_OK)
      << kolo_last_error();
  EXPECT_EQ(wait_or_abort(h), KOLO_ERR_MISMATCH);
  EXPECT_NE(std::string(kolo_handle_message(h)).find("group member row sizes: [3,3] on rank 0"),
            std::string::npos)
      << kolo_handle_message(h);
  kolo_handle_release(h);
  // Allgather: rows may differ, trailing dimensions (given as shapes) may not.
  const int64_t grows[] = {1, 1}, grow_counts[] = {6, 6};
  const int64_t d0[] = {1, 2, 3}, d1[] = {1, 6}, d1_other[] = {1, 3, 2};
  const kolo_shape_t shapes[] = {{3, d0}, {rank_ == 0 ? 2 : 3, rank_ == 0 ? d1 : d1_other}};
  kolo_options_t o = KOLO_OPTIONS_INIT;
  o.shapes = shapes;
  ASSERT_EQ(kolo_grouped_allgather_async(2, names, inputs, grows, grow_counts, KOLO_FLOAT32, cpu(),
                                         &o, &h),
            KOLO_OK)
      << kolo_last_error();
  EXPECT_EQ(wait_or_abort(h), KOLO_ERR_MISMATCH);
  EXPECT_NE(std::string(kolo_handle_message(h)).find("shape: [[1, 2, 3], [1, 6]] on rank 0"),
            std::string::npos)
      << kolo_handle_message(h);
  kolo_handle_release(h);
}

TEST_F(Grouped, BadArgumentsAreRefusedByName) {
  float x[4] = {0, 0, 0, 0};
  const char* names[] = {"b.0", "b.0"};
  const void* inputs[] = {x, x};
  void* outputs[] = {x, x};
  const int64_t rows[] = {2, 2}, row_counts[] = {2, 2};
  kolo_handle_t h = reinterpret_cast<kolo_handle_t>(uintptr_t{0x10});
  EXPECT_EQ(kolo_grouped_allgather_async(2, names, inputs, rows, nullptr, KOLO_FLOAT32, cpu(),
                                         nullptr, &h),
            KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(h, nullptr);
  EXPECT_NE(std::string(kolo_last_error()).find("row_counts is NULL"), std::string::npos);
  EXPECT_EQ(kolo_grouped_allgather_async(2, names, inputs, rows, row_counts, KOLO_FLOAT32, cpu(),
                                         nullptr, &h),
            KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kolo_last_error()).find("appears twice"), std::string::npos);
  const char* distinct[] = {"b.0", "b.1"};
  EXPECT_EQ(kolo_grouped_reducescatter_async(2, distinct, inputs, outputs, rows, row_counts,
                                             KOLO_FLOAT32, KOLO_OP_MAX, 1.0, 1.0, cpu(), nullptr,
                                             &h),
            KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kolo_last_error()).find("grouped reducescatter takes op sum or average"),
            std::string::npos)
      << kolo_last_error();
  EXPECT_EQ(kolo_grouped_reducescatter_async(0, distinct, inputs, outputs, rows, row_counts,
                                             KOLO_FLOAT32, KOLO_OP_SUM, 1.0, 1.0, cpu(), nullptr,
                                             &h),
            KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kolo_last_error()).find("grouped reducescatter of no tensors"),
            std::string::npos)
      << kolo_last_error();
}

}  // namespace
}  // namespace kolo_test
