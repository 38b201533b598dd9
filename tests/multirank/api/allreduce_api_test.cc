// kolo_allreduce_async through the C API under mpiexec -n 2, 3, 4: every dtype and
// op with exact expected values, many tensors out of order from several threads,
// mismatches, duplicates, shutdown with pending work, fusion on and off, knobs.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

#include "api_dtypes.h"
#include "api_fixture.h"

namespace kolo_test {
namespace {

const ::testing::Environment* const kMpi = ::testing::AddGlobalTestEnvironment(new MpiEnvironment);

template <typename T>
class AllreduceDtype : public KoloTest {};

TYPED_TEST_SUITE(AllreduceDtype, AllDtypes);

// Rank r's element i: 1 or 2 (products stay small), 0 for bool sometimes.
double input_value(int rank, int64_t i, bool is_bool) {
  if (is_bool) return ((rank + i) % 3) == 0 ? 1 : 0;
  return 1 + (rank + i) % 2 + (i % 3 == 0 ? rank : 0);
}

double expected(kolo_op_t op, int size, int64_t i, bool is_bool, bool is_integer) {
  std::vector<double> v;
  for (int r = 0; r < size; ++r) v.push_back(input_value(r, i, is_bool));
  switch (op) {
    case KOLO_OP_SUM: {
      double s = std::accumulate(v.begin(), v.end(), 0.0);
      return is_bool ? (s > 0) : s;
    }
    case KOLO_OP_AVERAGE: {
      double s = std::accumulate(v.begin(), v.end(), 0.0);
      return is_integer ? std::trunc(s / size) : s / size;
    }
    case KOLO_OP_MIN: return *std::min_element(v.begin(), v.end());
    case KOLO_OP_MAX: return *std::max_element(v.begin(), v.end());
    case KOLO_OP_PRODUCT: {
      double p = 1;
      for (double x : v) p *= x;
      return p;
    }
  }
  return NAN;
}

TYPED_TEST(AllreduceDtype, EveryOpExactOnEveryRank) {
  using T = TypeParam;
  const kolo_dtype_t dtype = T::kDtype;
  const bool is_bool = dtype == KOLO_BOOL;
  const bool is_integer = dtype <= KOLO_INT64;
  for (kolo_op_t op : {KOLO_OP_SUM, KOLO_OP_AVERAGE, KOLO_OP_MIN, KOLO_OP_MAX, KOLO_OP_PRODUCT}) {
    if (is_bool && op == KOLO_OP_AVERAGE) continue;  // refused; tested below
    for (int64_t count : {int64_t{1}, int64_t{this->size_ - 1}, int64_t{this->size_ + 1},
                          int64_t{1000}, int64_t{(1 << 18) + 3}}) {
      std::vector<typename T::Storage> in(count), out(count);
      for (int64_t i = 0; i < count; ++i) in[i] = T::from(input_value(this->rank_, i, is_bool));
      std::string name = "t" + std::to_string(op) + "_" + std::to_string(count);
      std::string msg;
      ASSERT_EQ(allreduce(name, in.data(), out.data(), count, dtype, op, &msg), KOLO_OK) << msg;
      for (int64_t i = 0; i < count; ++i) {
        double want = expected(op, this->size_, i, is_bool, is_integer);
        double got = T::to(out[i]);
        const bool power_of_two = (this->size_ & (this->size_ - 1)) == 0;
        if (op == KOLO_OP_AVERAGE && !is_integer && !power_of_two) {
          // sum * (1/3) is not exact; allow the type's rounding of the factor.
          const double tol = dtype == KOLO_FLOAT64 ? 1e-14 : dtype == KOLO_FLOAT32 ? 1e-6 : 1e-2;
          ASSERT_NEAR(got, want, tol * want) << name << " i=" << i;
        } else {
          ASSERT_EQ(got, want) << name << " i=" << i;
        }
      }
    }
  }
}

TEST_F(KoloTest, ManyTensorsOutOfOrderFromSeveralThreads) {
  const int tensors = 300, threads = 3;
  std::mt19937 sizes(2024);
  std::vector<int64_t> counts(tensors);
  for (auto& c : counts) c = sizes() % 5000;
  for (int step = 0; step < 3; ++step) {
    std::vector<int> order(tensors);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), std::mt19937(rank_ * 7919 + step));
    std::vector<std::vector<float>> bufs(tensors);
    std::vector<kolo_handle_t> handles(tensors, nullptr);
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        for (int k = t; k < tensors; k += threads) {
          int id = order[k];
          bufs[id].resize(counts[id]);
          for (int64_t i = 0; i < counts[id]; ++i) bufs[id][i] = (rank_ + 1) * float(id % 13 + i % 11);
          std::string name = "layer" + std::to_string(id);
          kolo_allreduce_async(name.c_str(), bufs[id].data(), bufs[id].data(), counts[id],
                               KOLO_FLOAT32, KOLO_OP_SUM, 1.0, 1.0, cpu(), &handles[id]);
        }
      });
    }
    for (auto& p : pool) p.join();
    const float rank_sum = size_ * (size_ + 1) / 2.0f;
    for (int id = 0; id < tensors; ++id) {
      ASSERT_NE(handles[id], nullptr);
      ASSERT_EQ(wait_or_abort(handles[id]), KOLO_OK) << kolo_handle_message(handles[id]);
      kolo_handle_release(handles[id]);
      for (int64_t i = 0; i < counts[id]; ++i)
        ASSERT_EQ(bufs[id][i], rank_sum * float(id % 13 + i % 11)) << "tensor " << id;
    }
  }
}

TEST_F(KoloTest, EveryMismatchIsReportedOnEveryRankWhileOthersComplete) {
  struct Case {
    const char* field;
    kolo_dtype_t dtype;
    int64_t count;
    kolo_op_t op;
    double prescale, postscale;
  };
  const Case base{"", KOLO_FLOAT32, 8, KOLO_OP_SUM, 1.0, 1.0};
  const Case cases[] = {{"dtype", KOLO_FLOAT64, 8, KOLO_OP_SUM, 1.0, 1.0},
                        {"count", KOLO_FLOAT32, 7, KOLO_OP_SUM, 1.0, 1.0},
                        {"op", KOLO_FLOAT32, 8, KOLO_OP_MAX, 1.0, 1.0},
                        {"prescale", KOLO_FLOAT32, 8, KOLO_OP_SUM, 0.5, 1.0},
                        {"postscale", KOLO_FLOAT32, 8, KOLO_OP_SUM, 1.0, 4.0}};
  for (const Case& c : cases) {
    const Case& mine = rank_ == size_ - 1 ? c : base;
    std::vector<double> bad(8, 1.0);
    std::vector<float> good(8, 1.0f);
    std::string bad_name = std::string("mismatch_") + c.field;
    kolo_handle_t hb = nullptr, hg = nullptr;
    ASSERT_EQ(kolo_allreduce_async(bad_name.c_str(), bad.data(), bad.data(), mine.count,
                                   mine.dtype, mine.op, mine.prescale, mine.postscale, cpu(), &hb),
              KOLO_OK);
    ASSERT_EQ(kolo_allreduce_async("bystander", good.data(), good.data(), 8, KOLO_FLOAT32,
                                   KOLO_OP_SUM, 1.0, 1.0, cpu(), &hg),
              KOLO_OK);
    EXPECT_EQ(wait_or_abort(hb), KOLO_ERR_MISMATCH);
    std::string msg = kolo_handle_message(hb);
    EXPECT_NE(msg.find(bad_name), std::string::npos) << msg;
    EXPECT_NE(msg.find(c.field), std::string::npos) << msg;
    EXPECT_NE(msg.find("rank " + std::to_string(size_ - 1)), std::string::npos) << msg;
    EXPECT_EQ(wait_or_abort(hg), KOLO_OK);
    EXPECT_EQ(good, std::vector<float>(8, float(size_)));
    EXPECT_EQ(bad, std::vector<double>(8, 1.0));  // a failed name leaves its buffer alone
    kolo_handle_release(hb);
    kolo_handle_release(hg);
  }
}

// A name in flight on this rank is refused and neither submission loses data. The
// rank that submits a name last may see it complete before its second call (its
// peers' parts are there, and under load its thread can lose the core between the
// two calls); the second submission is then rightly accepted and the test failed.
// So each round has a late rank that submits only after the others have checked,
// as tests/python/test_numpy_ops.py's test_duplicate_name_in_flight does.
TEST_F(KoloTest, DuplicateInFlightNameIsRefusedAndNothingIsLost) {
  for (const int late : {size_ - 1, 0}) {
    const std::string name = "dup" + std::to_string(late);
    std::vector<int32_t> a(16, rank_ + 1), b(16, 100);
    kolo_handle_t h1 = nullptr;
    if (rank_ != late) {
      ASSERT_EQ(kolo_allreduce_async(name.c_str(), a.data(), a.data(), 16, KOLO_INT32,
                                     KOLO_OP_SUM, 1, 1, cpu(), &h1),
                KOLO_OK);
      kolo_handle_t h2 = nullptr;
      EXPECT_EQ(kolo_allreduce_async(name.c_str(), b.data(), b.data(), 16, KOLO_INT32,
                                     KOLO_OP_SUM, 1, 1, cpu(), &h2),
                KOLO_ERR_DUPLICATE_NAME);
      EXPECT_EQ(h2, nullptr);
      EXPECT_NE(std::string(kolo_last_error()).find("'" + name + "'"), std::string::npos);
    }
    world_barrier();  // the others have checked; `name` may complete now
    if (rank_ == late) {
      ASSERT_EQ(kolo_allreduce_async(name.c_str(), a.data(), a.data(), 16, KOLO_INT32,
                                     KOLO_OP_SUM, 1, 1, cpu(), &h1),
                KOLO_OK);
    }
    ASSERT_EQ(wait_or_abort(h1, "allreduce of \"" + name + "\""), KOLO_OK);
    kolo_handle_release(h1);
    EXPECT_EQ(a, std::vector<int32_t>(16, size_ * (size_ + 1) / 2));
    EXPECT_EQ(b, std::vector<int32_t>(16, 100));
    // Once complete, the name may be used again.
    EXPECT_EQ(allreduce(name, b.data(), b.data(), 16, KOLO_INT32, KOLO_OP_SUM), KOLO_OK);
    EXPECT_EQ(b, std::vector<int32_t>(16, 100 * size_));
  }
}

TEST_F(KoloTest, BadArgumentsAndBoolAverageAreRefusedLocally) {
  std::vector<uint8_t> flags(4, 1);
  std::string msg;
  EXPECT_EQ(allreduce("b", flags.data(), flags.data(), 4, KOLO_BOOL, KOLO_OP_AVERAGE, &msg),
            KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_NE(msg.find("bool"), std::string::npos) << msg;
  EXPECT_EQ(allreduce("c", flags.data(), flags.data(), -3, KOLO_UINT8, KOLO_OP_SUM, &msg),
            KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(allreduce("d", flags.data(), flags.data(), 4, (kolo_dtype_t)77, KOLO_OP_SUM, &msg),
            KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_NE(msg.find("dtype"), std::string::npos) << msg;
  kolo_handle_t h = nullptr;
  EXPECT_EQ(kolo_allreduce_async("e", flags.data(), flags.data(), 4, KOLO_UINT8, KOLO_OP_SUM, 1, 1,
                                 cpu(), nullptr),
            KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kolo_wait(nullptr, 1.0), KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(h, nullptr);
  EXPECT_EQ(flags, std::vector<uint8_t>(4, 1));
}

// Where CUDA memory cannot be taken (a build without NCCL, or no visible GPU, as
// in CI) the call refuses it at once, saying why, on every rank; a CPU handle has
// no device work for kolo_handle_stream_wait.
TEST_F(KoloTest, CudaMemoryWithoutAUsableGpuIsRefusedClearly) {
  float x[4] = {1, 2, 3, 4};
  kolo_handle_t h = nullptr;
  const kolo_device_t gpu = {KOLO_DEVICE_CUDA, -1, nullptr};
  // No elements: where a GPU is usable this is a valid no-op and touches nothing.
  const kolo_status_t s =
      kolo_allreduce_async("gpu", nullptr, nullptr, 0, KOLO_FLOAT32, KOLO_OP_SUM, 1, 1, gpu, &h);
  if (s == KOLO_OK) {  // a machine with a GPU: tests/gpu covers it
    EXPECT_EQ(kolo_wait(h, 60.0), KOLO_OK);
    kolo_handle_release(h);
    GTEST_SKIP() << "a CUDA device is usable here";
  }
  EXPECT_EQ(s, KOLO_ERR_UNSUPPORTED) << kolo_last_error();
  EXPECT_EQ(h, nullptr);
  const std::string why = kolo_last_error();
  const char* reason = nullptr;
  if (kolo_transport_built("nccl", &reason)) {
    EXPECT_NE(why.find("no CUDA device is visible"), std::string::npos) << why;
  } else {
    EXPECT_NE(why.find("which this kolo does not have"), std::string::npos) << why;
  }
  EXPECT_NE(why.find("tensor 'gpu'"), std::string::npos) << why;

  ASSERT_EQ(kolo_allreduce_async("cpu", x, x, 4, KOLO_FLOAT32, KOLO_OP_SUM, 1, 1, cpu(), &h), KOLO_OK);
  EXPECT_EQ(kolo_handle_stream_wait(h, nullptr), KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kolo_last_error()).find("not a CUDA operation"), std::string::npos);
  EXPECT_EQ(kolo_wait(h, 60.0), KOLO_OK);
  kolo_handle_release(h);
  EXPECT_EQ(kolo_handle_stream_wait(nullptr, nullptr), KOLO_ERR_INVALID_ARGUMENT);
}

TEST_F(KoloTest, WaitTimesOutAndPollReportsProgress) {
  std::vector<float> x(4, 1.0f);
  kolo_handle_t h = nullptr;
  // Rank 0 submits first and alone; the others join after a barrier.
  if (rank_ == 0) {
    ASSERT_EQ(kolo_allreduce_async("late", x.data(), x.data(), 4, KOLO_FLOAT32, KOLO_OP_SUM, 1, 1,
                                   cpu(), &h),
              KOLO_OK);
    int done = 1;
    EXPECT_EQ(kolo_poll(h, &done), KOLO_OK);
    EXPECT_EQ(done, 0);
    EXPECT_EQ(kolo_wait(h, 0.05), KOLO_ERR_TIMEOUT);
    EXPECT_EQ(kolo_handle_status(h), KOLO_IN_PROGRESS);
  }
  world_barrier();
  if (rank_ != 0)
    ASSERT_EQ(kolo_allreduce_async("late", x.data(), x.data(), 4, KOLO_FLOAT32, KOLO_OP_SUM, 1, 1,
                                   cpu(), &h),
              KOLO_OK);
  ASSERT_EQ(wait_or_abort(h), KOLO_OK);
  EXPECT_EQ(kolo_handle_status(h), KOLO_OK);
  kolo_handle_release(h);
  EXPECT_EQ(x, std::vector<float>(4, float(size_)));
}

// Fusion on and off (and a tiny threshold) give bit-identical results. Inputs are
// dyadic so that sums are exact in any order: with 3+ ranks, floating-point sums in
// different orders (a lone tensor and a fused bucket map elements to different
// ring chunks) could otherwise differ in the last bit, legitimately.
TEST(KoloKnobs, FusionOnAndOffGiveIdenticalResults) {
  std::vector<std::vector<float>> results;
  for (const char* threshold : {"0", "4K", "64M"}) {
    setenv("KOLO_FUSION_THRESHOLD", threshold, 1);
    ASSERT_EQ(kolo_init(), KOLO_OK) << kolo_last_error();
    const int rank = kolo_rank();
    std::vector<std::vector<float>> bufs(40);
    std::vector<kolo_handle_t> hs(40);
    for (int t = 0; t < 40; ++t) {
      bufs[t].resize(37 * t + 1);
      for (size_t i = 0; i < bufs[t].size(); ++i) bufs[t][i] = 0.25f * (rank + 1) + 0.5f * (i % 97);  // sums exact
      std::string name = "f" + std::to_string(t);
      ASSERT_EQ(kolo_allreduce_async(name.c_str(), bufs[t].data(), bufs[t].data(), bufs[t].size(),
                                     KOLO_FLOAT32, KOLO_OP_AVERAGE, 1.0, 1.0, cpu(), &hs[t]),
                KOLO_OK);
    }
    std::vector<float> flat;
    for (int t = 0; t < 40; ++t) {
      ASSERT_EQ(wait_or_abort(hs[t]), KOLO_OK);
      kolo_handle_release(hs[t]);
      flat.insert(flat.end(), bufs[t].begin(), bufs[t].end());
    }
    results.push_back(flat);
    ASSERT_EQ(kolo_shutdown(), KOLO_OK);
  }
  unsetenv("KOLO_FUSION_THRESHOLD");
  EXPECT_EQ(results[0], results[1]);
  EXPECT_EQ(results[0], results[2]);
}

TEST(KoloKnobs, BadKnobFailsInitWithTheVariableNamed) {
  setenv("KOLO_FUSION_THRESHOLD", "banana", 1);
  EXPECT_EQ(kolo_init(), KOLO_ERR_INVALID_ARGUMENT);
  std::string msg = kolo_last_error();
  EXPECT_NE(msg.find("KOLO_FUSION_THRESHOLD"), std::string::npos) << msg;
  EXPECT_NE(msg.find("banana"), std::string::npos) << msg;
  EXPECT_EQ(kolo_is_initialized(), 0);
  EXPECT_EQ(kolo_rank(), -1);
  unsetenv("KOLO_FUSION_THRESHOLD");
  setenv("KOLO_TRANSPORT", "carrier-pigeon", 1);
  EXPECT_EQ(kolo_init(), KOLO_ERR_INVALID_ARGUMENT);
  msg = kolo_last_error();
  EXPECT_NE(msg.find("carrier-pigeon"), std::string::npos) << msg;
  unsetenv("KOLO_TRANSPORT");
  ASSERT_EQ(kolo_init(), KOLO_OK) << kolo_last_error();
  EXPECT_EQ(kolo_shutdown(), KOLO_OK);
}

TEST(KoloLifecycle, CallsBeforeInitAreRefused) {
  float x = 1;
  kolo_handle_t h = nullptr;
  EXPECT_EQ(kolo_allreduce_async("x", &x, &x, 1, KOLO_FLOAT32, KOLO_OP_SUM, 1, 1, cpu(), &h),
            KOLO_ERR_NOT_INITIALIZED);
  EXPECT_EQ(kolo_size(), -1);
  EXPECT_EQ(kolo_shutdown(), KOLO_OK);  // harmless when not initialised
}

// One rank's shutdown completes pending work everywhere with KOLO_ERR_SHUTDOWN.
TEST(KoloLifecycle, ShutdownWithPendingWorkReachesEveryRank) {
  ASSERT_EQ(kolo_init(), KOLO_OK) << kolo_last_error();
  const int rank = kolo_rank(), size = kolo_size();
  std::vector<float> x(4, 1.0f);
  kolo_handle_t h = nullptr;
  if (rank != 0) {  // a name rank 0 never submits: it can never become ready
    ASSERT_EQ(kolo_allreduce_async("orphan", x.data(), x.data(), 4, KOLO_FLOAT32, KOLO_OP_SUM, 1,
                                   1, cpu(), &h),
              KOLO_OK);
  }
  world_barrier();
  if (rank == 0) {
    EXPECT_EQ(kolo_shutdown(), KOLO_OK);
  } else {
    EXPECT_EQ(wait_or_abort(h), KOLO_ERR_SHUTDOWN);
    EXPECT_NE(std::string(kolo_handle_message(h)).find("shut down"), std::string::npos);
    kolo_handle_release(h);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (kolo_is_initialized() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    EXPECT_EQ(kolo_is_initialized(), 0);
    kolo_handle_t late = nullptr;
    EXPECT_EQ(kolo_allreduce_async("late", x.data(), x.data(), 4, KOLO_FLOAT32, KOLO_OP_SUM, 1, 1,
                                   cpu(), &late),
              KOLO_ERR_SHUTDOWN);
    EXPECT_EQ(kolo_shutdown(), KOLO_OK);
  }
  EXPECT_EQ(x, std::vector<float>(4, 1.0f));
  (void)size;
  world_barrier();
}

}  // namespace
}  // namespace kolo_test
