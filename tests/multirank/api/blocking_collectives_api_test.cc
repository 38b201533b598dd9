// The other collectives' blocking forms through the C API (kolo_broadcast,
// kolo_reducescatter, kolo_allgather, kolo_alltoall, and kolo_allgather_into):
// the asynchronous calls' results, uncached then cached (alone, Note [A call
// alone] in src/core/coordinator.h); their errors on every rank with no handle
// left behind; bad arguments refused locally; a peer that says more. Under
// mpiexec at 2, 3 and 4 ranks, and as a socket-world job.
#include <unistd.h>

#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "api_fixture.h"

namespace kolo_test {
namespace {

const ::testing::Environment* const kMpi = ::testing::AddGlobalTestEnvironment(new MpiEnvironment);

// A blocking allgather's or alltoall's handle: its output as int64 values and its
// splits; released here. Empty when the handle is NULL (a failure is the caller's
// to see).
struct Gathered {
  std::vector<int64_t> values, splits;
};
Gathered take(kolo_handle_t h, int size) {
  Gathered g;
  if (h == nullptr) {
    ADD_FAILURE() << "no handle";
    return g;
  }
  const void* out = nullptr;
  int64_t bytes = 0;
  EXPECT_EQ(kolo_handle_output(h, &out, &bytes), KOLO_OK) << kolo_last_error();
  const auto* v = static_cast<const int64_t*>(out);
  g.values.assign(v, v + bytes / 8);
  g.splits.resize(static_cast<size_t>(size));
  EXPECT_EQ(kolo_handle_splits(h, g.splits.data(), size), KOLO_OK) << kolo_last_error();
  kolo_handle_release(h);
  return g;
}

// A blocking call's completed handle and an asynchronous one's (waited for here):
// each the rows and splits `want` says.
void expect_gathered(kolo_handle_t blocked, kolo_handle_t async, const Gathered& want, int size,
                     const std::string& what) {
  ASSERT_EQ(wait_or_abort(async), KOLO_OK) << kolo_handle_message(async);
  const Gathered b = take(blocked, size), a = take(async, size);
  EXPECT_EQ(b.values, want.values) << what;
  EXPECT_EQ(b.splits, want.splits) << what;
  EXPECT_EQ(a.values, b.values) << what;
  EXPECT_EQ(a.splits, b.splits) << what;
}

// Each rank contributes rank + 1 rows (times m) of two int64; the gathered rows
// in rank order and the splits, through the blocking and the asynchronous call.
TEST_F(KoloTest, BlockingAllgatherAgreesWithTheAsyncCall) {
  for (int64_t m : {int64_t{1}, int64_t{40}, int64_t{1500}}) {  // rides, rides, past the carry
    const int64_t rows = (rank_ + 1) * m;
    Gathered want;
    for (int r = 0; r < size_; ++r) {
      want.splits.push_back((r + 1) * m);
      for (int64_t j = 0; j < 2 * (r + 1) * m; ++j) want.values.push_back(1000000 * r + j);
    }
    for (int repeat = 0; repeat < 3; ++repeat) {  // the first uncached, then cached and alone
      std::vector<int64_t> in(static_cast<size_t>(2 * rows));
      std::iota(in.begin(), in.end(), int64_t{1000000} * rank_);
      const std::string tag = std::to_string(m);
      kolo_handle_t blocked = reinterpret_cast<kolo_handle_t>(&in);  // must become the output's
      ASSERT_EQ(kolo_allgather(("gather_b" + tag).c_str(), in.data(), rows, 2, KOLO_INT64,
                               &blocked),
                KOLO_OK)
          << kolo_last_error();
      kolo_handle_t async = nullptr;
      ASSERT_EQ(kolo_allgather_async(("gather_a" + tag).c_str(), in.data(), rows, 2, KOLO_INT64,
                                     cpu(), &async),
                KOLO_OK);
      expect_gathered(blocked, async, want, size_, "m " + tag + " repeat " + std::to_string(repeat));
    }
  }
}

// kolo_allgather_into: every rank's rows (m of two int64 each) into the caller's
// output, blocking and asynchronous, the same as the handle form; nothing past
// the output written. The largest size in kolo memory, where the peers write
// into the output themselves (Note [An allgather pushes its block]).
TEST_F(KoloTest, AllgatherIntoTheCallersOutputAgreesWithTheHandleForm) {
  for (int64_t m : {int64_t{1}, int64_t{40}, int64_t{1500}, int64_t{40000}}) {
    const bool mapped = m == 40000;
    const size_t total = static_cast<size_t>(2 * m * size_);
    std::vector<int64_t> heap(total + 8);
    void* shared = nullptr;
    if (mapped) ASSERT_EQ(kolo_alloc((total + 8) * sizeof(int64_t), &shared), KOLO_OK);
    int64_t* out = mapped ? static_cast<int64_t*>(shared) : heap.data();
    std::vector<int64_t> async(total + 8);
    for (int repeat = 0; repeat < 3; ++repeat) {
      std::vector<int64_t> in(static_cast<size_t>(2 * m)), want;
      std::iota(in.begin(), in.end(), int64_t{1000000} * rank_ + repeat);
      for (int r = 0; r < size_; ++r)
        for (int64_t j = 0; j < 2 * m; ++j) want.push_back(1000000 * r + repeat + j);
      std::fill(out, out + total + 8, -1);
      std::fill(async.begin(), async.end(), -1);
      const std::string tag = std::to_string(m);
      ASSERT_EQ(kolo_allgather_into(("into_b" + tag).c_str(), in.data(), out, m, 2, KOLO_INT64),
                KOLO_OK)
          << kolo_last_error();
      kolo_handle_t h = nullptr;
      ASSERT_EQ(kolo_allgather_into_async(("into_a" + tag).c_str(), in.data(), async.data(), m, 2,
                                          KOLO_INT64, cpu(), &h),
                KOLO_OK)
          << kolo_last_error();
      ASSERT_EQ(wait_or_abort(h), KOLO_OK) << kolo_handle_message(h);
      std::vector<int64_t> splits(static_cast<size_t>(size_));
      ASSERT_EQ(kolo_handle_splits(h, splits.data(), size_), KOLO_OK);
      EXPECT_EQ(splits, std::vector<int64_t>(static_cast<size_t>(size_), m));
      const void* data = &h;
      int64_t bytes = -1;
      ASSERT_EQ(kolo_handle_output(h, &data, &bytes), KOLO_OK);
      EXPECT_EQ(bytes, 0);  // the output is the caller's
      kolo_handle_release(h);
      EXPECT_TRUE(std::equal(want.begin(), want.end(), out)) << "m " << m << " repeat " << repeat;
      EXPECT_TRUE(std::equal(want.begin(), want.end(), async.begin())) << "m " << m;
      for (size_t k = total; k < total + 8; ++k) {
        ASSERT_EQ(out[k], -1) << "written past the output, m " << m;
        ASSERT_EQ(async[k], -1) << "written past the output, m " << m;
      }
    }
    if (mapped) {
      world_barrier();  // no peer writes into it any more
      EXPECT_EQ(kolo_free(shared), KOLO_OK);
    }
  }
}

// Ranks that give different rows to kolo_allgather_into, or one that calls
// kolo_allgather for the name the others gather into their outputs: every rank
// fails with KOLO_ERR_MISMATCH naming the output, nothing written; bad arguments
// are refused locally.
TEST_F(KoloTest, AllgatherIntoMismatchesAndBadArguments) {
  const bool last = rank_ == size_ - 1;
  std::vector<int32_t> in(6, rank_), out(static_cast<size_t>(6 * size_), -1);
  EXPECT_EQ(kolo_allgather_into("into_rows", in.data(), out.data(), last ? 2 : 3, 2, KOLO_INT32),
            KOLO_ERR_MISMATCH);
  EXPECT_NE(std::string(kolo_last_error()).find("ranks disagree on output"), std::string::npos)
      << kolo_last_error();
  kolo_handle_t h = reinterpret_cast<kolo_handle_t>(&in);
  const kolo_status_t mixed =
      last ? kolo_allgather("into_mixed", in.data(), 3, 2, KOLO_INT32, &h)
           : kolo_allgather_into("into_mixed", in.data(), out.data(), 3, 2, KOLO_INT32);
  EXPECT_EQ(mixed, KOLO_ERR_MISMATCH);
  EXPECT_NE(std::string(kolo_last_error()).find("kolo's on rank " + std::to_string(size_ - 1)),
            std::string::npos)
      << kolo_last_error();
  if (last) EXPECT_EQ(h, nullptr);
  EXPECT_EQ(out, std::vector<int32_t>(out.size(), -1));
  for (int repeat = 0; repeat < 2; ++repeat) {  // the same name, now alike
    ASSERT_EQ(kolo_allgather_into("into_rows", in.data(), out.data(), 3, 2, KOLO_INT32), KOLO_OK)
        << kolo_last_error();
    for (int r = 0; r < size_; ++r) EXPECT_EQ(out[static_cast<size_t>(6 * r + 5)], r);
  }
  EXPECT_EQ(kolo_allgather_into("bad", in.data(), nullptr, 3, 2, KOLO_INT32),
            KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kolo_last_error()).find("output is NULL"), std::string::npos)
      << kolo_last_error();
  EXPECT_EQ(kolo_allgather_into("bad", out.data() + 1, out.data(), 3, 2, KOLO_INT32),
            KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kolo_last_error()).find("overlap"), std::string::npos)
      << kolo_last_error();
  kolo_device_t gpu = cpu();
  gpu.kind = KOLO_DEVICE_CUDA;
  // Host memory only: refused as unsupported (without a device transport, as
  // every CUDA tensor is; with one, as an allgather into the caller's output).
  EXPECT_EQ(kolo_allgather_into_ex("bad", in.data(), out.data(), 3, 2, KOLO_INT32, gpu, nullptr),
            KOLO_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(kolo_last_error()).find("CUDA"), std::string::npos) << kolo_last_error();
  h = reinterpret_cast<kolo_handle_t>(&in);
  EXPECT_EQ(kolo_allgather_into_async_ex("bad", in.data(), nullptr, 3, 2, KOLO_INT32, cpu(),
                                         nullptr, &h),
            KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(h, nullptr);
}

// Rank r sends r + d + 1 rows (times m) to rank d, each row one int64 naming
// source, destination and position; explicit splits and the even split.
TEST_F(KoloTest, BlockingAlltoallAgreesWithTheAsyncCall) {
  for (int64_t m : {int64_t{1}, int64_t{30}, int64_t{900}}) {
    std::vector<int64_t> send, in;
    for (int d = 0; d < size_; ++d) {
      send.push_back((rank_ + d + 1) * m);
      for (int64_t j = 0; j < send.back(); ++j) in.push_back(1000000 * rank_ + 10000 * d + j);
    }
    Gathered want;
    for (int src = 0; src < size_; ++src) {
      want.splits.push_back((src + rank_ + 1) * m);
      for (int64_t j = 0; j < want.splits.back(); ++j)
        want.values.push_back(1000000 * src + 10000 * rank_ + j);
    }
    const int64_t rows = static_cast<int64_t>(in.size());
    for (int repeat = 0; repeat < 3; ++repeat) {
      const std::string tag = std::to_string(m);
      kolo_handle_t blocked = nullptr;
      ASSERT_EQ(kolo_alltoall(("a2a_b" + tag).c_str(), in.data(), rows, 1, send.data(),
                              KOLO_INT64, &blocked),
                KOLO_OK)
          << kolo_last_error();
      kolo_handle_t async = nullptr;
      ASSERT_EQ(kolo_alltoall_async(("a2a_a" + tag).c_str(), in.data(), rows, 1, send.data(),
                                    KOLO_INT64, cpu(), &async),
                KOLO_OK);
      expect_gathered(blocked, async, want, size_, "m " + tag + " repeat " + std::to_string(repeat));
      // The even split: size_ * m rows, m to each rank.
      std::vector<int64_t> even(static_cast<size_t>(size_ * m));
      for (size_t j = 0; j < even.size(); ++j) even[j] = 1000 * rank_ + static_cast<int64_t>(j);
      kolo_handle_t h = nullptr;
      ASSERT_EQ(kolo_alltoall_ex(("a2a_even" + tag).c_str(), even.data(), size_ * m, 1, nullptr,
                                 KOLO_INT64, cpu(), nullptr, &h),
                KOLO_OK)
          << kolo_last_error();
      const Gathered e = take(h, size_);
      ASSERT_EQ(e.values.size(), even.size());
      for (int src = 0; src < size_; ++src)
        for (int64_t j = 0; j < m; ++j)
          ASSERT_EQ(e.values[static_cast<size_t>(src * m + j)], 1000 * src + rank_ * m + j);
    }
  }
}

// The last rank broadcasts (a root other than 0); in place and not.
TEST_F(KoloTest, BlockingBroadcastAgreesWithTheAsyncCall) {
  const int root = size_ - 1;
  for (int64_t count : {int64_t{1}, int64_t{700}, int64_t{70000}}) {
    for (int repeat = 0; repeat < 3; ++repeat) {
      std::vector<float> in(static_cast<size_t>(count)), want(in.size());
      for (int64_t i = 0; i < count; ++i) {
        want[i] = static_cast<float>(root * 100000 + i + repeat);
        in[i] = rank_ == root ? want[i] : -1.0f;
      }
      std::vector<float> out(in.size(), -2.0f), inplace = in, async(in.size(), -3.0f);
      const std::string tag = std::to_string(count);
      ASSERT_EQ(kolo_broadcast(("bcast_b" + tag).c_str(), in.data(), out.data(), count,
                               KOLO_FLOAT32, root),
                KOLO_OK)
          << kolo_last_error();
      ASSERT_EQ(kolo_broadcast_ex(("bcast_i" + tag).c_str(), inplace.data(), inplace.data(),
                                  count, KOLO_FLOAT32, root, cpu(), nullptr),
                KOLO_OK)
          << kolo_last_error();
      kolo_handle_t h = nullptr;
      ASSERT_EQ(kolo_broadcast_async(("bcast_a" + tag).c_str(), in.data(), async.data(), count,
                                     KOLO_FLOAT32, root, cpu(), &h),
                KOLO_OK);
      ASSERT_EQ(wait_or_abort(h), KOLO_OK) << kolo_handle_message(h);
      kolo_handle_release(h);
      EXPECT_EQ(out, want) << "count " << count << " repeat " << repeat;
      EXPECT_EQ(inplace, want) << "count " << count << " repeat " << repeat;
      EXPECT_EQ(async, want);
    }
  }
}

// Rows that do not divide evenly (the first rows % size ranks get one more), SUM
// exact in int32, AVERAGE with factors in float64 bit for bit as the async call.
TEST_F(KoloTest, BlockingReducescatterAgreesWithTheAsyncCall) {
  for (int64_t m : {int64_t{1}, int64_t{50}, int64_t{3000}}) {
    const int64_t rows = size_ * m + 1, row_count = 3;
    int64_t first = 0;
    for (int r = 0; r < rank_; ++r) first += kolo_reducescatter_shard_rows(rows, r, size_);
    const int64_t shard = kolo_reducescatter_shard_rows(rows, rank_, size_);
    for (int repeat = 0; repeat < 3; ++repeat) {
      std::vector<int32_t> in(static_cast<size_t>(rows * row_count));
      std::vector<double> din(in.size());
      for (size_t i = 0; i < in.size(); ++i) {
        in[i] = rank_ + static_cast<int32_t>(i) + repeat;
        din[i] = 0.25 * rank_ + static_cast<double>(i) / 3;
      }
      std::vector<int32_t> out(static_cast<size_t>(shard * row_count), -1);
      std::vector<double> dout(out.size(), -1), dasync(out.size(), -2);
      const std::string tag = std::to_string(m);
      ASSERT_EQ(kolo_reducescatter(("rs_b" + tag).c_str(), in.data(), out.data(), rows, row_count,
                                   KOLO_INT32, KOLO_OP_SUM),
                KOLO_OK)
          << kolo_last_error();
      for (int64_t k = 0; k < shard * row_count; ++k)
        ASSERT_EQ(out[k], size_ * (first * row_count + k + repeat) + size_ * (size_ - 1) / 2)
            << "m " << m << " k " << k;
      ASSERT_EQ(kolo_reducescatter_ex(("rs_bd" + tag).c_str(), din.data(), dout.data(), rows,
                                      row_count, KOLO_FLOAT64, KOLO_OP_AVERAGE, 0.5, 3.0, cpu(),
                                      nullptr),
                KOLO_OK)
          << kolo_last_error();
      kolo_handle_t h = nullptr;
      ASSERT_EQ(kolo_reducescatter_async(("rs_ad" + tag).c_str(), din.data(), dasync.data(), rows,
                                         row_count, KOLO_FLOAT64, KOLO_OP_AVERAGE, 0.5, 3.0, cpu(),
                                         &h),
                KOLO_OK);
      ASSERT_EQ(wait_or_abort(h), KOLO_OK) << kolo_handle_message(h);
      kolo_handle_release(h);
      EXPECT_EQ(dout, dasync) << "m " << m << " repeat " << repeat;
    }
  }
}

// Ranks that disagree: every rank gets the asynchronous call's error (naming the
// tensor), the outputs are untouched, a blocking allgather's or alltoall's
// *handle is NULL, and the next call of each works.
TEST_F(KoloTest, BlockingCollectivesMismatchOnEveryRankAndNoHandleIsLeft) {
  const bool odd = rank_ == size_ - 1;
  std::vector<int64_t> x(12, 5), out(12, 7);
  kolo_handle_t h = reinterpret_cast<kolo_handle_t>(&x);
  EXPECT_EQ(kolo_allgather("bm_gather", x.data(), 2, odd ? 3 : 2, KOLO_INT64, &h),
            KOLO_ERR_MISMATCH);
  EXPECT_NE(std::string(kolo_last_error()).find("bm_gather"), std::string::npos)
      << kolo_last_error();
  EXPECT_EQ(h, nullptr);
  h = reinterpret_cast<kolo_handle_t>(&x);
  EXPECT_EQ(kolo_alltoall("bm_a2a", x.data(), size_, 1, nullptr, odd ? KOLO_FLOAT64 : KOLO_INT64,
                          &h),
            KOLO_ERR_MISMATCH);
  EXPECT_NE(std::string(kolo_last_error()).find("bm_a2a"), std::string::npos) << kolo_last_error();
  EXPECT_EQ(h, nullptr);
  EXPECT_EQ(kolo_broadcast("bm_bcast", x.data(), out.data(), 12, KOLO_INT64, odd ? 0 : size_ - 1),
            KOLO_ERR_MISMATCH);
  EXPECT_NE(std::string(kolo_last_error()).find("bm_bcast"), std::string::npos)
      << kolo_last_error();
  EXPECT_EQ(kolo_reducescatter("bm_rs", x.data(), out.data(), odd ? 11 : 12, 1, KOLO_INT64,
                               KOLO_OP_SUM),
            KOLO_ERR_MISMATCH);
  EXPECT_NE(std::string(kolo_last_error()).find("bm_rs"), std::string::npos) << kolo_last_error();
  EXPECT_EQ(out, std::vector<int64_t>(12, 7));
  EXPECT_EQ(x, std::vector<int64_t>(12, 5));
  for (int repeat = 0; repeat < 2; ++repeat) {
    ASSERT_EQ(kolo_allgather("bm_gather", x.data(), 2, 2, KOLO_INT64, &h), KOLO_OK)
        << kolo_last_error();
    EXPECT_EQ(take(h, size_).values, std::vector<int64_t>(static_cast<size_t>(4 * size_), 5));
    ASSERT_EQ(kolo_broadcast("bm_bcast", x.data(), out.data(), 12, KOLO_INT64, 0), KOLO_OK)
        << kolo_last_error();
    EXPECT_EQ(out, std::vector<int64_t>(12, 5));
  }
}

TEST_F(KoloTest, BlockingCollectivesRefuseBadArgumentsLocally) {
  std::vector<int32_t> x(8, 1), out(8, 2);
  EXPECT_EQ(kolo_allgather("g", x.data(), 2, 1, KOLO_INT32, nullptr), KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kolo_last_error()).find("handle"), std::string::npos) << kolo_last_error();
  kolo_handle_t h = reinterpret_cast<kolo_handle_t>(&x);
  EXPECT_EQ(kolo_allgather(nullptr, x.data(), 2, 1, KOLO_INT32, &h), KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(h, nullptr);
  h = reinterpret_cast<kolo_handle_t>(&x);
  const std::vector<int64_t> splits(static_cast<size_t>(size_), 3);  // more rows than the input
  EXPECT_EQ(kolo_alltoall("t", x.data(), 2, 1, splits.data(), KOLO_INT32, &h),
            KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(h, nullptr);
  EXPECT_EQ(kolo_broadcast("b", x.data(), out.data(), 8, KOLO_INT32, size_),
            KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kolo_last_error()).find("root"), std::string::npos) << kolo_last_error();
  EXPECT_EQ(kolo_reducescatter("r", x.data(), out.data(), 8, 1, KOLO_INT32, KOLO_OP_MAX),
            KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kolo_reducescatter("r", x.data(), out.data(), -1, 1, KOLO_INT32, KOLO_OP_SUM),
            KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(x, std::vector<int32_t>(8, 1));
  EXPECT_EQ(out, std::vector<int32_t>(8, 2));
}

// As ACallAloneAndAPeerThatSaysMore, for a blocking allgather (whose handle is
// made before it goes alone, for its output) and a blocking broadcast: the last
// rank has both submitted before the others call them one at a time.
TEST_F(KoloTest, BlockingCollectivesAloneAndAPeerThatSaysMore) {
  const int last = size_ - 1;
  for (int64_t count : {int64_t{3}, int64_t{600}, int64_t{5000}}) {
    const std::string g = "says_g" + std::to_string(count);
    const std::string b = "says_b" + std::to_string(count);
    for (int round = 0; round < 6; ++round) {
      std::vector<int32_t> in(static_cast<size_t>(count), rank_ * 1000 + round);
      std::vector<int32_t> bc(static_cast<size_t>(count), rank_ == 0 ? 7 + round : -1);
      std::vector<int32_t> gathered;
      auto read = [&](kolo_handle_t h) {
        const void* out = nullptr;
        int64_t bytes = 0;
        EXPECT_EQ(kolo_handle_output(h, &out, &bytes), KOLO_OK);
        gathered.assign(static_cast<const int32_t*>(out),
                        static_cast<const int32_t*>(out) + bytes / 4);
        kolo_handle_release(h);
      };
      if (round < 2 || rank_ != last) {
        if (round >= 2) world_barrier();
        kolo_handle_t h = nullptr;
        ASSERT_EQ(kolo_allgather(g.c_str(), in.data(), count, 1, KOLO_INT32, &h), KOLO_OK)
            << kolo_last_error();
        read(h);
        ASSERT_EQ(kolo_broadcast(b.c_str(), bc.data(), bc.data(), count, KOLO_INT32, 0), KOLO_OK)
            << kolo_last_error();
      } else {
        kolo_handle_t hb = nullptr, hg = nullptr;
        ASSERT_EQ(kolo_broadcast_async(b.c_str(), bc.data(), bc.data(), count, KOLO_INT32, 0,
                                       cpu(), &hb),
                  KOLO_OK);
        ASSERT_EQ(kolo_allgather_async(g.c_str(), in.data(), count, 1, KOLO_INT32, cpu(), &hg),
                  KOLO_OK);
        ASSERT_NO_FATAL_FAILURE(meet_then_wait(hg, g, hb, b));
        kolo_handle_release(hb);
        read(hg);
      }
      std::vector<int32_t> want;
      for (int r = 0; r < size_; ++r) want.insert(want.end(), count, r * 1000 + round);
      EXPECT_EQ(gathered, want) << g << " round " << round;
      EXPECT_EQ(bc, std::vector<int32_t>(static_cast<size_t>(count), 7 + round))
          << b << " round " << round;
    }
  }
}

}  // namespace
}  // namespace kolo_test
