// The collective set through the C API under mpiexec -n 2, 3, 4: allgather,
// broadcast, alltoall, reducescatter, grouped allreduce, barrier and join, with
// exact values, uneven shapes, zero-size contributions and mismatches.
#include <unistd.h>

#include <cstring>
#include <numeric>
#include <vector>

#include "api_fixture.h"

namespace kolo_test {
namespace {

const ::testing::Environment* const kMpi = ::testing::AddGlobalTestEnvironment(new MpiEnvironment);

class Collectives : public KoloTest {};

template <typename T>
std::vector<T> output_of(kolo_handle_t h) {
  const void* data = nullptr;
  int64_t bytes = -1;
  EXPECT_EQ(kolo_handle_output(h, &data, &bytes), KOLO_OK);
  std::vector<T> out(bytes / sizeof(T));
  if (bytes > 0) std::memcpy(out.data(), data, bytes);
  return out;
}

// A finished allgather or alltoall: its output and the rows received from each
// rank are `want` and `want_splits`. Releases the handle.
template <typename T>
void expect_output_and_splits(kolo_handle_t h, const std::vector<T>& want,
                              const std::vector<int64_t>& want_splits) {
  EXPECT_EQ(output_of<T>(h), want);
  std::vector<int64_t> splits(want_splits.size());
  EXPECT_EQ(kolo_handle_splits(h, splits.data(), static_cast<int64_t>(splits.size())), KOLO_OK);
  EXPECT_EQ(splits, want_splits);
  kolo_handle_release(h);
}

TEST_F(Collectives, AllgatherRowsDifferPerRankIncludingZero) {
  for (int64_t row : {1, 5}) {
    const int64_t rows = rank_ % 2 == 0 ? rank_ + 1 : 0;  // odd ranks contribute nothing
    std::vector<double> in(rows * row);
    for (size_t i = 0; i < in.size(); ++i) in[i] = rank_ * 1000 + double(i);
    kolo_handle_t h = nullptr;
    std::string name = "gather" + std::to_string(row);
    ASSERT_EQ(kolo_allgather_async(name.c_str(), in.data(), rows, row, KOLO_FLOAT64, cpu(), &h), KOLO_OK);
    ASSERT_EQ(wait_or_abort(h), KOLO_OK) << kolo_handle_message(h);
    std::vector<double> want;
    std::vector<int64_t> want_splits;
    for (int r = 0; r < size_; ++r) {
      const int64_t rr = r % 2 == 0 ? r + 1 : 0;
      want_splits.push_back(rr);
      for (int64_t i = 0; i < rr * row; ++i) want.push_back(r * 1000 + double(i));
    }
    expect_output_and_splits(h, want, want_splits);
  }
}

TEST_F(Collectives, BroadcastFromEveryRoot) {
  for (int root = 0; root < size_; ++root) {
    std::vector<int64_t> in(513), out(513, -1);
    for (size_t i = 0; i < in.size(); ++i) in[i] = root == rank_ ? int64_t(i) * 7 - 1000 : -5;
    kolo_handle_t h1 = nullptr, h2 = nullptr;
    std::string n1 = "bcast" + std::to_string(root), n2 = "bcast_in_place" + std::to_string(root);
    ASSERT_EQ(kolo_broadcast_async(n1.c_str(), rank_ == root ? in.data() : nullptr, out.data(),
                                   513, KOLO_INT64, root, cpu(), &h1), KOLO_OK);
    ASSERT_EQ(kolo_broadcast_async(n2.c_str(), in.data(), in.data(), 513, KOLO_INT64, root, cpu(), &h2),
              KOLO_OK);
    ASSERT_EQ(wait_or_abort(h1), KOLO_OK) << kolo_handle_message(h1);
    ASSERT_EQ(wait_or_abort(h2), KOLO_OK) << kolo_handle_message(h2);
    for (size_t i = 0; i < 513; ++i) {
      ASSERT_EQ(out[i], int64_t(i) * 7 - 1000);
      ASSERT_EQ(in[i], int64_t(i) * 7 - 1000);
    }
    kolo_handle_release(h1);
    kolo_handle_release(h2);
  }
}

TEST_F(Collectives, AlltoallUnevenSplits) {
  const int64_t row = 3;
  std::vector<int64_t> splits(size_);
  std::vector<int32_t> in;
  for (int d = 0; d < size_; ++d) {
    splits[d] = (rank_ + 2 * d) % 3;  // zero for some pairs
    for (int64_t i = 0; i < splits[d] * row; ++i) in.push_back(rank_ * 10000 + d * 100 + int(i));
  }
  const int64_t rows = std::accumulate(splits.begin(), splits.end(), int64_t{0});
  kolo_handle_t h = nullptr;
  ASSERT_EQ(kolo_alltoall_async("a2a", in.data(), rows, row, splits.data(), KOLO_INT32, cpu(), &h), KOLO_OK);
  ASSERT_EQ(wait_or_abort(h), KOLO_OK) << kolo_handle_message(h);
  std::vector<int32_t> want;
  std::vector<int64_t> received;
  for (int s = 0; s < size_; ++s) {
    received.push_back((s + 2 * rank_) % 3);
    for (int64_t i = 0; i < received.back() * row; ++i) want.push_back(s * 10000 + rank_ * 100 + int(i));
  }
  expect_output_and_splits(h, want, received);
}

TEST_F(Collectives, ReducescatterSumAndAverageWithUnevenShards) {
  const int64_t rows = 2 * size_ + 1, row = 4;  // not divisible: the first rank gets one more
  std::vector<float> in(rows * row);
  for (size_t i = 0; i < in.size(); ++i) in[i] = float(i % 17) * (rank_ + 1);
  const int64_t mine = kolo_reducescatter_shard_rows(rows, rank_, size_);
  EXPECT_EQ(mine, rank_ == 0 ? 3 : 2);
  int64_t first = 0;
  for (int r = 0; r < rank_; ++r) first += kolo_reducescatter_shard_rows(rows, r, size_) * row;
  for (kolo_op_t op : {KOLO_OP_SUM, KOLO_OP_AVERAGE}) {
    std::vector<float> out(mine * row, -1.0f);
    kolo_handle_t h = nullptr;
    std::string name = "rs" + std::to_string(op);
    ASSERT_EQ(kolo_reducescatter_async(name.c_str(), in.data(), out.data(), rows, row, KOLO_FLOAT32,
                                       op, 1.0, 1.0, cpu(), &h), KOLO_OK);
    ASSERT_EQ(wait_or_abort(h), KOLO_OK) << kolo_handle_message(h);
    const float rank_sum = size_ * (size_ + 1) / 2.0f;
    for (int64_t i = 0; i < mine * row; ++i) {
      float sum = float((first + i) % 17) * rank_sum;
      if (op == KOLO_OP_SUM) {
        ASSERT_EQ(out[i], sum) << i;
      } else {
        ASSERT_NEAR(out[i], sum / size_, 1e-5f * sum) << i;
      }
    }
    kolo_handle_release(h);
  }
  kolo_handle_t h = nullptr;
  EXPECT_EQ(kolo_reducescatter_async("rs_max", in.data(), in.data(), rows, row, KOLO_FLOAT32,
                                     KOLO_OP_MAX, 1.0, 1.0, cpu(), &h), KOLO_ERR_INVALID_ARGUMENT);
}

TEST_F(Collectives, GroupedAllreduce) {
  std::vector<std::vector<int32_t>> bufs = {std::vector<int32_t>(3), std::vector<int32_t>(0),
                                            std::vector<int32_t>(1000)};
  const char* names[] = {"g.a", "g.b", "g.c"};
  const void* ins[3];
  void* outs[3];
  int64_t counts[3];
  for (int t = 0; t < 3; ++t) {
    for (size_t i = 0; i < bufs[t].size(); ++i) bufs[t][i] = (rank_ + 1) * int(t + i);
    ins[t] = outs[t] = bufs[t].data();
    counts[t] = bufs[t].size();
  }
  kolo_handle_t h = nullptr;
  ASSERT_EQ(kolo_grouped_allreduce_async(3, names, ins, outs, counts, KOLO_INT32, KOLO_OP_SUM, 1.0,
                                         1.0, cpu(), &h), KOLO_OK);
  ASSERT_EQ(wait_or_abort(h), KOLO_OK) << kolo_handle_message(h);
  kolo_handle_release(h);
  const int rank_sum = size_ * (size_ + 1) / 2;
  for (int t = 0; t < 3; ++t)
    for (size_t i = 0; i < bufs[t].size(); ++i) ASSERT_EQ(bufs[t][i], rank_sum * int(t + i));
}

TEST_F(Collectives, BarrierAndJoinWithUnevenSteps) {
  ASSERT_EQ(kolo_barrier(), KOLO_OK);
  const int steps = 1 + rank_;  // the last rank joins last
  for (int step = 0; step < steps; ++step) {
    std::vector<double> g(16, 2.0);
    std::string msg;
    ASSERT_EQ(allreduce("grad", g.data(), g.data(), 16, KOLO_FLOAT64, KOLO_OP_AVERAGE, &msg), KOLO_OK) << msg;
    int active = 0;
    for (int r = 0; r < size_; ++r) active += step < 1 + r ? 1 : 0;
    EXPECT_EQ(g, std::vector<double>(16, 2.0 * active / size_)) << "step " << step;
  }
  if (rank_ == size_ - 1) {  // everyone else has joined: other collectives fail
    std::vector<float> x(4);
    kolo_handle_t h = nullptr;
    ASSERT_EQ(kolo_allgather_async("while_joined", x.data(), 4, 1, KOLO_FLOAT32, cpu(), &h), KOLO_OK);
    EXPECT_EQ(wait_or_abort(h), KOLO_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(kolo_handle_message(h)).find("joined"), std::string::npos);
    kolo_handle_release(h);
  }
  int last = -1;
  ASSERT_EQ(kolo_join(&last), KOLO_OK) << kolo_last_error();
  EXPECT_EQ(last, size_ - 1);
  std::vector<int32_t> v(4, 1);
  ASSERT_EQ(allreduce("after_join", v.data(), v.data(), 4, KOLO_INT32, KOLO_OP_SUM), KOLO_OK);
  EXPECT_EQ(v, std::vector<int32_t>(4, size_));
  ASSERT_EQ(kolo_barrier(), KOLO_OK);
}

TEST_F(Collectives, MismatchesAreReportedOnEveryRank) {
  std::vector<float> buf(64, 1.0f);
  kolo_handle_t hg = nullptr, hb = nullptr, ha = nullptr;
  const bool odd = rank_ == size_ - 1;
  ASSERT_EQ(kolo_allgather_async("g", buf.data(), 2, odd ? 3 : 2, KOLO_FLOAT32, cpu(), &hg), KOLO_OK);
  ASSERT_EQ(kolo_broadcast_async("b", buf.data(), buf.data(), 8, KOLO_FLOAT32, odd ? 1 : 0, cpu(), &hb),
            KOLO_OK);
  ASSERT_EQ(kolo_alltoall_async("a", buf.data(), size_, 1, nullptr, odd ? KOLO_INT32 : KOLO_FLOAT32,
                                cpu(), &ha), KOLO_OK);
  for (auto [h, field] : {std::pair<kolo_handle_t, const char*>{hg, "trailing dimensions"},
                          {hb, "root"}, {ha, "dtype"}}) {
    EXPECT_EQ(wait_or_abort(h), KOLO_ERR_MISMATCH);
    std::string msg = kolo_handle_message(h);
    EXPECT_NE(msg.find(field), std::string::npos) << msg;
    EXPECT_NE(msg.find("rank " + std::to_string(size_ - 1)), std::string::npos) << msg;
    kolo_handle_release(h);
  }
  EXPECT_EQ(buf, std::vector<float>(64, 1.0f));
  // Splits that do not add up are refused locally.
  std::vector<int64_t> splits(size_, 1);
  kolo_handle_t h = nullptr;
  EXPECT_EQ(kolo_alltoall_async("bad_splits", buf.data(), size_ + 1, 1, splits.data(), KOLO_FLOAT32,
                                cpu(), &h), KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kolo_last_error()).find("splits add up"), std::string::npos);
}

// Note [A call alone] (src/core/coordinator.h): a cached allgather or broadcast
// that a cycle drains alone rides with the AND by itself when every rank's
// vector is its own. Here the last rank has both names submitted before the
// others submit them one at a time: for the first, the vectors differ and the
// call goes on in that cycle; for the second they agree. Rows that differ per
// rank, every output exact, on every rank, in the last rank's handles too.
TEST_F(Collectives, ACollectiveAloneAndAPeerThatSaysMore) {
  const int last = size_ - 1;
  const int64_t rows = rank_ + 1;
  for (int round = 0; round < 6; ++round) {
    std::vector<int32_t> in(static_cast<size_t>(rows * 3));
    for (size_t i = 0; i < in.size(); ++i) in[i] = rank_ * 100 + static_cast<int32_t>(i) + round;
    std::vector<int32_t> value(40, rank_ + round);
    std::vector<int32_t> want_gather;
    std::vector<int64_t> want_splits;
    for (int r = 0; r < size_; ++r) {
      want_splits.push_back(r + 1);
      for (int64_t i = 0; i < (r + 1) * 3; ++i) want_gather.push_back(r * 100 + static_cast<int32_t>(i) + round);
    }
    kolo_handle_t hg = nullptr, hb = nullptr;
    auto gather = [&] {
      ASSERT_EQ(kolo_allgather_async("alone_g", in.data(), rows, 3, KOLO_INT32, cpu(), &hg), KOLO_OK);
    };
    auto broadcast = [&] {
      ASSERT_EQ(kolo_broadcast_async("alone_b", value.data(), value.data(), 40, KOLO_INT32, 0,
                                     cpu(), &hb),
                KOLO_OK);
    };
    if (round < 2) {  // both names cached on every rank, each alone
      gather();
      ASSERT_EQ(wait_or_abort(hg), KOLO_OK) << kolo_handle_message(hg);
      broadcast();
      ASSERT_EQ(wait_or_abort(hb), KOLO_OK) << kolo_handle_message(hb);
    } else if (rank_ == last) {
      gather();
      broadcast();
      usleep(20 * 1000);  // its coordinator has run a cycle saying both by now
      world_barrier();
      ASSERT_EQ(wait_or_abort(hb), KOLO_OK) << kolo_handle_message(hb);
      ASSERT_EQ(wait_or_abort(hg), KOLO_OK) << kolo_handle_message(hg);
    } else {
      world_barrier();
      broadcast();
      ASSERT_EQ(wait_or_abort(hb), KOLO_OK) << kolo_handle_message(hb);
      gather();
      ASSERT_EQ(wait_or_abort(hg), KOLO_OK) << kolo_handle_message(hg);
    }
    EXPECT_EQ(value, std::vector<int32_t>(40, round)) << "round " << round;
    kolo_handle_release(hb);
    expect_output_and_splits(hg, want_gather, want_splits);
  }
}

// kolo_handle_phases (kolo-allreduce-perf --breakdown): a completed host
// operation has passed every phase, in order; before completion it is refused.
TEST_F(Collectives, PhasesOfACompletedOperationAreInOrder) {
  std::vector<float> in(4, 1.0f), out(4, 0.0f);
  int64_t phases[KOLO_NUM_PHASES] = {};
  for (int i = 0; i < 3; ++i) {  // the first negotiates by the slow path, the rest by the cache
    kolo_handle_t h = nullptr;
    ASSERT_EQ(kolo_allreduce_async("phased", in.data(), out.data(), 4, KOLO_FLOAT32,
                                   KOLO_OP_SUM, 1.0, 1.0, cpu(), &h),
              KOLO_OK);
    ASSERT_EQ(wait_or_abort(h), KOLO_OK) << kolo_handle_message(h);
    EXPECT_EQ(out, std::vector<float>(4, static_cast<float>(size_)));
    ASSERT_EQ(kolo_handle_phases(h, phases, KOLO_NUM_PHASES), KOLO_OK);
    kolo_handle_release(h);
    EXPECT_GT(phases[0], 0);
    for (int p = 1; p < KOLO_NUM_PHASES; ++p) EXPECT_LE(phases[p - 1], phases[p]) << "phase " << p;
  }
  std::vector<int> value(1, rank_);
  kolo_handle_t h = nullptr;
  ASSERT_EQ(
      kolo_broadcast_async("phased_b", value.data(), value.data(), 1, KOLO_INT32, 0, cpu(), &h),
      KOLO_OK);
  ASSERT_EQ(wait_or_abort(h), KOLO_OK) << kolo_handle_message(h);
  EXPECT_EQ(value[0], 0);
  ASSERT_EQ(kolo_handle_phases(h, phases, KOLO_NUM_PHASES), KOLO_OK);
  for (int p = 1; p < KOLO_NUM_PHASES; ++p) EXPECT_LE(phases[p - 1], phases[p]) << "phase " << p;
  EXPECT_EQ(kolo_handle_phases(h, nullptr, 1), KOLO_ERR_INVALID_ARGUMENT);
  kolo_handle_release(h);
}

}  // namespace
}  // namespace kolo_test
