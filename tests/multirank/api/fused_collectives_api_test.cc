// Allgathers, broadcasts and allreduces submitted together through the C API under
// mpiexec -n 2, 3, 4, for every dtype: what lands in one cycle is fused (Note
// [Fused allgather and broadcast] in src/core/executor_gather.h), and every result must
// be exact whether it was fused or not — uneven and zero rows, empty broadcasts,
// roots on every rank, in place and not, out of order on odd ranks, with the
// fusion threshold on and off.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "api_dtypes.h"
#include "api_fixture.h"

namespace kolo_test {
namespace {

const ::testing::Environment* const kMpi = ::testing::AddGlobalTestEnvironment(new MpiEnvironment);

template <typename T, kolo_dtype_t D>
using Type = kolo_test_types::Plain<T, D>;

template <typename T>
class FusedDtype : public KoloTest {};

TYPED_TEST_SUITE(FusedDtype, AllDtypes);

constexpr int kTensors = 12;

// Allgather and broadcast move bits: their data are bytes, compared exactly
// (bool's bytes are kept 0 or 1: kolo may normalise them).
unsigned char byte_of(int source, int tensor, size_t i, bool is_bool) {
  const auto b = static_cast<unsigned char>((i * 7 + 3 * source + 11 * tensor) % 251);
  return is_bool ? b % 2 : b;
}
int64_t rows_of(int t, int rank) { return (t + 2 * rank) % 3; }  // zero on some ranks
int64_t row_count_of(int t) { return 1 + t % 3; }
int64_t broadcast_count(int t) { return t % 5; }  // some empty
double allreduce_value(int rank, int t, int64_t i) { return static_cast<double>((rank + t + i) % 3); }

struct Tensors {
  std::vector<std::vector<unsigned char>> gather_in, bcast_buf, bcast_out;
  std::vector<std::vector<unsigned char>> reduce_in, reduce_out;
  std::vector<kolo_handle_t> gathers, bcasts, reduces;
};

template <typename T>
void submit_all(Tensors* ts, int rank, int size, const std::string& prefix) {
  using S = typename T::Storage;
  const bool is_bool = T::kDtype == KOLO_BOOL;
  ts->gather_in.resize(kTensors);
  ts->bcast_buf.resize(kTensors);
  ts->bcast_out.resize(kTensors);
  ts->reduce_in.resize(kTensors);
  ts->reduce_out.resize(kTensors);
  ts->gathers.assign(kTensors, nullptr);
  ts->bcasts.assign(kTensors, nullptr);
  ts->reduces.assign(kTensors, nullptr);
  for (int k = 0; k < kTensors; ++k) {
    const int t = rank % 2 == 0 ? k : kTensors - 1 - k;  // odd ranks submit in reverse
    const std::string tag = prefix + std::to_string(t);
    const int64_t rows = rows_of(t, rank), row = row_count_of(t);
    auto& g = ts->gather_in[t];
    g.resize(static_cast<size_t>(rows * row) * sizeof(S));
    for (size_t i = 0; i < g.size(); ++i) g[i] = byte_of(rank, t, i, is_bool);
    ASSERT_EQ(kolo_allgather_async(("g" + tag).c_str(), g.data(), rows, row, T::kDtype, cpu(),
                                   &ts->gathers[t]), KOLO_OK) << kolo_last_error();

    const int root = t % size;
    const size_t bbytes = static_cast<size_t>(broadcast_count(t)) * sizeof(S);
    auto& b = ts->bcast_buf[t];
    b.resize(bbytes);
    for (size_t i = 0; i < bbytes; ++i) b[i] = byte_of(rank, t, i, is_bool);
    const bool in_place = t % 2 == 0;
    ts->bcast_out[t].assign(bbytes, 0);
    void* out = in_place ? b.data() : ts->bcast_out[t].data();
    ASSERT_EQ(kolo_broadcast_async(("b" + tag).c_str(), b.data(), out, broadcast_count(t),
                                   T::kDtype, root, cpu(), &ts->bcasts[t]), KOLO_OK)
        << kolo_last_error();

    const int64_t count = 1 + t % 4;
    ts->reduce_in[t].resize(static_cast<size_t>(count) * sizeof(S));
    ts->reduce_out[t].assign(static_cast<size_t>(count) * sizeof(S), 0);
    for (int64_t i = 0; i < count; ++i) {
      const S v = T::from(allreduce_value(rank, t, i));
      std::memcpy(ts->reduce_in[t].data() + i * sizeof(S), &v, sizeof(S));
    }
    ASSERT_EQ(kolo_allreduce_async(("a" + tag).c_str(), ts->reduce_in[t].data(),
                                   ts->reduce_out[t].data(), count, T::kDtype, KOLO_OP_MAX, 1.0,
                                   1.0, cpu(), &ts->reduces[t]), KOLO_OK) << kolo_last_error();
  }
}

template <typename T>
void check_all(Tensors* ts, int rank, int size) {
  using S = typename T::Storage;
  const bool is_bool = T::kDtype == KOLO_BOOL;
  for (int t = 0; t < kTensors; ++t) {
    SCOPED_TRACE("tensor " + std::to_string(t));
    ASSERT_EQ(wait_or_abort(ts->gathers[t]), KOLO_OK) << kolo_handle_message(ts->gathers[t]);
    ASSERT_EQ(wait_or_abort(ts->bcasts[t]), KOLO_OK) << kolo_handle_message(ts->bcasts[t]);
    ASSERT_EQ(wait_or_abort(ts->reduces[t]), KOLO_OK) << kolo_handle_message(ts->reduces[t]);

    std::vector<unsigned char> want;
    std::vector<int64_t> want_splits;
    for (int r = 0; r < size; ++r) {
      want_splits.push_back(rows_of(t, r));
      const size_t bytes = static_cast<size_t>(rows_of(t, r) * row_count_of(t)) * sizeof(S);
      for (size_t i = 0; i < bytes; ++i) want.push_back(byte_of(r, t, i, is_bool));
    }
    const void* data = nullptr;
    int64_t bytes = -1;
    ASSERT_EQ(kolo_handle_output(ts->gathers[t], &data, &bytes), KOLO_OK);
    ASSERT_EQ(bytes, static_cast<int64_t>(want.size()));
    std::vector<unsigned char> got(want.size());
    if (bytes > 0) std::memcpy(got.data(), data, want.size());
    EXPECT_EQ(got, want) << "allgather";
    std::vector<int64_t> splits(size);
    ASSERT_EQ(kolo_handle_splits(ts->gathers[t], splits.data(), size), KOLO_OK);
    EXPECT_EQ(splits, want_splits);

    const int root = t % size;
    std::vector<unsigned char> bwant(static_cast<size_t>(broadcast_count(t)) * sizeof(S));
    for (size_t i = 0; i < bwant.size(); ++i) bwant[i] = byte_of(root, t, i, is_bool);
    EXPECT_EQ(t % 2 == 0 ? ts->bcast_buf[t] : ts->bcast_out[t], bwant) << "broadcast";

    for (size_t i = 0; i * sizeof(S) < ts->reduce_out[t].size(); ++i) {
      double want_max = 0;
      for (int r = 0; r < size; ++r)
        want_max = std::max(want_max, T::to(T::from(allreduce_value(r, t, static_cast<int64_t>(i)))));
      S v;
      std::memcpy(&v, ts->reduce_out[t].data() + i * sizeof(S), sizeof(S));
      EXPECT_EQ(T::to(v), want_max) << "allreduce element " << i;
    }
    kolo_handle_release(ts->gathers[t]);
    kolo_handle_release(ts->bcasts[t]);
    kolo_handle_release(ts->reduces[t]);
  }
}

TYPED_TEST(FusedDtype, MixedCollectivesSubmittedTogetherAreExact) {
  for (int round = 0; round < 3; ++round) {
    Tensors ts;
    submit_all<TypeParam>(&ts, this->rank_, this->size_, "r" + std::to_string(round) + "_");
    check_all<TypeParam>(&ts, this->rank_, this->size_);
  }
}

// Fusion off (threshold 0) and a threshold smaller than most buckets: the same
// results. The knob is read at init, so kolo restarts with it.
TEST(FusedKnobs, ThresholdZeroAndTinyGiveTheSameResults) {
  for (const char* threshold : {"0", "24"}) {
    ASSERT_EQ(setenv("KOLO_FUSION_THRESHOLD", threshold, 1), 0);
    ASSERT_EQ(kolo_init(), KOLO_OK) << kolo_last_error();
    Tensors ts;
    submit_all<Type<int32_t, KOLO_INT32>>(&ts, kolo_rank(), kolo_size(), "k");
    check_all<Type<int32_t, KOLO_INT32>>(&ts, kolo_rank(), kolo_size());
    EXPECT_EQ(kolo_shutdown(), KOLO_OK);
  }
  unsetenv("KOLO_FUSION_THRESHOLD");
}

}  // namespace
}  // namespace kolo_test
