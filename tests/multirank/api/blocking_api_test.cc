// The blocking allreduce (kolo_allreduce, kolo_allreduce_ex) through the C API:
// the same results, bit for bit, as the asynchronous call for every dtype, op and
// size (cached and carried, past the carry, past the shm engine's one round);
// the same refusals and errors, on every rank; a name in flight refused at once;
// blocking and asynchronous calls from several threads at once; and a blocking
// call that waits for a peer returns when kolo stops. The other blocking
// collectives (kolo_broadcast, kolo_reducescatter, kolo_allgather, kolo_alltoall)
// likewise: the asynchronous call's results, its errors on every rank with no
// handle left behind, a peer that says more, and kolo stopping under them. Where a
// waiter may run the cycle (one node, host memory) the call enters the cycle
// without the queue (Note [A blocking call enters the cycle] in
// src/core/coordinator_gate.h); elsewhere it submits and waits.
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "api_dtypes.h"
#include "api_fixture.h"
#include "small_inputs.h"

namespace kolo_test {
namespace {

const ::testing::Environment* const kMpi = ::testing::AddGlobalTestEnvironment(new MpiEnvironment);

template <typename T>
class BlockingDtype : public KoloTest {};
TYPED_TEST_SUITE(BlockingDtype, AllDtypes);

// Each size once uncached, then cached; 1 and 300 elements ride with the AND,
// 3000 ride for the types of at most 4 bytes and not for the 8-byte ones (past
// the 16 KiB carry), 70000 take the shm
// engine's rounds. The asynchronous call runs the same inputs under its own
// name: the two outputs must be the same bytes, and every op but AVERAGE the
// exact values.
TYPED_TEST(BlockingDtype, AgreesBitForBitWithTheAsyncCall) {
  using T = TypeParam;
  const kolo_dtype_t dtype = T::kDtype;
  const bool is_bool = dtype == KOLO_BOOL;
  for (kolo_op_t op : {KOLO_OP_SUM, KOLO_OP_AVERAGE, KOLO_OP_MIN, KOLO_OP_MAX, KOLO_OP_PRODUCT}) {
    if (is_bool && op == KOLO_OP_AVERAGE) continue;  // refused
    for (int64_t count : {int64_t{1}, int64_t{300}, int64_t{3000}, int64_t{70000}}) {
      const std::string tag = std::to_string(op) + "_" + std::to_string(count);
      for (int repeat = 0; repeat < 3; ++repeat) {
        std::vector<typename T::Storage> in(count), blocked(count), async(count);
        for (int64_t i = 0; i < count; ++i)
          in[i] = T::from(input_value(this->rank_, i, repeat, is_bool));
        ASSERT_EQ(kolo_allreduce(("blocking" + tag).c_str(), in.data(), blocked.data(), count,
                                 dtype, op),
                  KOLO_OK)
            << kolo_last_error();
        std::string msg;
        ASSERT_EQ(allreduce("async" + tag, in.data(), async.data(), count, dtype, op, &msg),
                  KOLO_OK)
            << msg;
        ASSERT_EQ(std::memcmp(blocked.data(), async.data(), count * sizeof(in[0])), 0)
            << tag << " repeat " << repeat;
        if (op != KOLO_OP_AVERAGE) {
          for (int64_t i = 0; i < count; ++i)
            ASSERT_EQ(T::to(blocked[i]), expected(op, this->size_, i, repeat, is_bool, false))
                << tag << " repeat " << repeat << " i=" << i;
        }
      }
    }
  }
}

// Factors, in place, and the options (KOLO_OPTION_DETERMINISTIC) as the async call.
TEST_F(KoloTest, FactorsInPlaceAndOptionsAsTheAsyncCall) {
  kolo_options_t options = KOLO_OPTIONS_INIT;
  for (int32_t flags : {0, KOLO_OPTION_DETERMINISTIC}) {
    options.flags = flags;
    for (int repeat = 0; repeat < 3; ++repeat) {
      std::vector<double> blocked(40), async(40);
      for (size_t i = 0; i < blocked.size(); ++i) blocked[i] = async[i] = 0.1 * (rank_ + 1) + i;
      const std::string tag = std::to_string(flags);
      ASSERT_EQ(kolo_allreduce_ex(("factors_b" + tag).c_str(), blocked.data(), blocked.data(), 40,
                                  KOLO_FLOAT64, KOLO_OP_AVERAGE, 0.5, 3.0, cpu(), &options),
                KOLO_OK)
          << kolo_last_error();
      kolo_handle_t h = nullptr;
      ASSERT_EQ(kolo_allreduce_async_ex(("factors_a" + tag).c_str(), async.data(), async.data(),
                                        40, KOLO_FLOAT64, KOLO_OP_AVERAGE, 0.5, 3.0, cpu(),
                                        &options, &h),
                KOLO_OK);
      ASSERT_EQ(wait_or_abort(h), KOLO_OK) << kolo_handle_message(h);
      kolo_handle_release(h);
      EXPECT_EQ(blocked, async);
      double want = 0;
      for (int r = 0; r < size_; ++r) want += 0.1 * (r + 1) + 7;
      EXPECT_NEAR(blocked[7], want * 0.5 * 3.0 / size_, 1e-12);
    }
  }
}

// A mismatch fails the name on every rank with the async call's status and
// message, leaves the buffers alone, and the next call of a good name works.
TEST_F(KoloTest, AMismatchFailsOnEveryRankAndTheNextCallWorks) {
  std::vector<float> x(8, 1.0f);
  const int64_t count = rank_ == size_ - 1 ? 7 : 8;
  EXPECT_EQ(kolo_allreduce("blocking_mismatch", x.data(), x.data(), count, KOLO_FLOAT32,
                           KOLO_OP_SUM),
            KOLO_ERR_MISMATCH);
  const std::string msg = kolo_last_error();
  EXPECT_NE(msg.find("blocking_mismatch"), std::string::npos) << msg;
  EXPECT_NE(msg.find("count"), std::string::npos) << msg;
  EXPECT_NE(msg.find("rank " + std::to_string(size_ - 1)), std::string::npos) << msg;
  EXPECT_EQ(x, std::vector<float>(8, 1.0f));
  for (int repeat = 0; repeat < 3; ++repeat) {
    ASSERT_EQ(kolo_allreduce("blocking_after", x.data(), x.data(), 8, KOLO_FLOAT32, KOLO_OP_SUM),
              KOLO_OK)
        << kolo_last_error();
  }
  EXPECT_EQ(x, std::vector<float>(8, static_cast<float>(size_ * size_ * size_)));
}

// A blocking call of a name this rank has in flight is refused at once (it must
// not wait for the name it duplicates), and neither call loses data. The late
// rank submits only after the others have checked (allreduce_api_test's
// DuplicateInFlightNameIsRefusedAndNothingIsLost says why).
TEST_F(KoloTest, ANameInFlightIsRefusedAtOnce) {
  const int late = size_ - 1;
  std::vector<int32_t> a(16, rank_ + 1), b(16, 100);
  kolo_handle_t h = nullptr;
  if (rank_ != late) {
    ASSERT_EQ(kolo_allreduce_async("blocking_dup", a.data(), a.data(), 16, KOLO_INT32,
                                   KOLO_OP_SUM, 1, 1, cpu(), &h),
              KOLO_OK);
    EXPECT_EQ(kolo_allreduce("blocking_dup", b.data(), b.data(), 16, KOLO_INT32, KOLO_OP_SUM),
              KOLO_ERR_DUPLICATE_NAME);
    EXPECT_NE(std::string(kolo_last_error()).find("'blocking_dup'"), std::string::npos)
        << kolo_last_error();
  }
  world_barrier();
  if (rank_ == late) {
    ASSERT_EQ(kolo_allreduce("blocking_dup", a.data(), a.data(), 16, KOLO_INT32, KOLO_OP_SUM),
              KOLO_OK)
        << kolo_last_error();
  } else {
    ASSERT_EQ(wait_or_abort(h), KOLO_OK) << kolo_handle_message(h);
    kolo_handle_release(h);
  }
  EXPECT_EQ(a, std::vector<int32_t>(16, size_ * (size_ + 1) / 2));
  EXPECT_EQ(b, std::vector<int32_t>(16, 100));
}

TEST_F(KoloTest, BadArgumentsAreRefusedLocally) {
  std::vector<uint8_t> flags(4, 1);
  EXPECT_EQ(kolo_allreduce(nullptr, flags.data(), flags.data(), 4, KOLO_UINT8, KOLO_OP_SUM),
            KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kolo_last_error()).find("name"), std::string::npos) << kolo_last_error();
  EXPECT_EQ(kolo_allreduce("b", flags.data(), flags.data(), 4, KOLO_BOOL, KOLO_OP_AVERAGE),
            KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kolo_last_error()).find("bool"), std::string::npos) << kolo_last_error();
  EXPECT_EQ(kolo_allreduce("c", flags.data(), flags.data(), -3, KOLO_UINT8, KOLO_OP_SUM),
            KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kolo_allreduce("d", flags.data(), flags.data(), 4, (kolo_dtype_t)77, KOLO_OP_SUM),
            KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kolo_last_error()).find("dtype"), std::string::npos) << kolo_last_error();
  EXPECT_EQ(flags, std::vector<uint8_t>(4, 1));
}

// Threads that call the blocking allreduce while another submits and waits:
// the gate is often taken by another thread, and the call then goes through
// the queue. Every result exact.
TEST_F(KoloTest, BlockingAndAsyncCallsFromSeveralThreads) {
  constexpr int kRounds = 150;
  auto blocking = [&](int thread, int* failures) {
    for (int i = 0; i < kRounds; ++i) {
      std::vector<int64_t> x(5 + thread * 300, rank_ + i);
      const std::string name = "thread" + std::to_string(thread) + "." + std::to_string(i % 7);
      if (kolo_allreduce(name.c_str(), x.data(), x.data(), static_cast<int64_t>(x.size()),
                         KOLO_INT64, KOLO_OP_SUM) != KOLO_OK ||
          x != std::vector<int64_t>(x.size(), int64_t{size_} * i + size_ * (size_ - 1) / 2))
        ++*failures;
    }
  };
  int failures[3] = {0, 0, 0};
  std::thread t0(blocking, 0, &failures[0]);
  std::thread t1(blocking, 1, &failures[1]);
  for (int i = 0; i < kRounds; ++i) {
    std::vector<float> y(64, 1.0f);
    std::string msg;
    if (allreduce("async." + std::to_string(i % 5), y.data(), y.data(), 64, KOLO_FLOAT32,
                  KOLO_OP_SUM, &msg) != KOLO_OK ||
        y != std::vector<float>(64, static_cast<float>(size_)))
      ++failures[2];
  }
  t0.join();
  t1.join();
  EXPECT_EQ(failures[0], 0);
  EXPECT_EQ(failures[1], 0);
  EXPECT_EQ(failures[2], 0);
}

// The last rank's side of a peer that says more (below): with both handles
// submitted, it lets its coordinator run a cycle saying both, meets the others,
// and waits for `a`, then `b`.
void meet_then_wait(kolo_handle_t a, const std::string& a_name, kolo_handle_t b,
                    const std::string& b_name) {
  usleep(20 * 1000);  // its coordinator has run a cycle saying both by now
  world_barrier();
  ASSERT_EQ(wait_or_abort(a, a_name), KOLO_OK) << kolo_handle_message(a);
  ASSERT_EQ(wait_or_abort(b, b_name), KOLO_OK) << kolo_handle_message(b);
}

// Note [A call alone] (src/core/coordinator.h): a blocking call of a cached name
// with nothing else on its rank completes from the carried parts right after
// the AND when every rank's vector says the same. Here the last rank has two
// cached names submitted (asynchronously) before the others call them one at a
// time, blocking: for the first, the last rank's vector says both are ready,
// the vectors differ, and the call goes on in that cycle (through the shm
// engine); for the second the vectors agree. Sizes that ride and that do not,
// every result exact, on every rank; the last rank's handles complete too.
TEST_F(KoloTest, ACallAloneAndAPeerThatSaysMore) {
  const int last = size_ - 1;
  for (int64_t count : {int64_t{3}, int64_t{500}, int64_t{9000}}) {
    const std::string x = "alone_x" + std::to_string(count);
    const std::string y = "alone_y" + std::to_string(count);
    auto want = [&](int round) {
      return std::vector<int32_t>(static_cast<size_t>(count), size_ * round + size_ * (size_ - 1) / 2);
    };
    for (int round = 0; round < 6; ++round) {
      std::vector<int32_t> a(static_cast<size_t>(count), rank_ + round);
      std::vector<int32_t> b(static_cast<size_t>(count), rank_ + round);
      if (round < 2) {  // both names cached on every rank, each call alone
        ASSERT_EQ(kolo_allreduce(x.c_str(), a.data(), a.data(), count, KOLO_INT32, KOLO_OP_SUM),
                  KOLO_OK)
            << kolo_last_error();
        ASSERT_EQ(kolo_allreduce(y.c_str(), b.data(), b.data(), count, KOLO_INT32, KOLO_OP_SUM),
                  KOLO_OK)
            << kolo_last_error();
      } else if (rank_ == last) {
        kolo_handle_t hx = nullptr, hy = nullptr;
        ASSERT_EQ(kolo_allreduce_async(x.c_str(), a.data(), a.data(), count, KOLO_INT32,
                                       KOLO_OP_SUM, 1, 1, cpu(), &hx),
                  KOLO_OK);
        ASSERT_EQ(kolo_allreduce_async(y.c_str(), b.data(), b.data(), count, KOLO_INT32,
                                       KOLO_OP_SUM, 1, 1, cpu(), &hy),
                  KOLO_OK);
        ASSERT_NO_FATAL_FAILURE(meet_then_wait(hy, y, hx, x));
        kolo_handle_release(hx);
        kolo_handle_release(hy);
      } else {
        world_barrier();
        ASSERT_EQ(kolo_allreduce(y.c_str(), b.data(), b.data(), count, KOLO_INT32, KOLO_OP_SUM),
                  KOLO_OK)
            << kolo_last_error();
        ASSERT_EQ(kolo_allreduce(x.c_str(), a.data(), a.data(), count, KOLO_INT32, KOLO_OP_SUM),
                  KOLO_OK)
            << kolo_last_error();
      }
      EXPECT_EQ(a, want(round)) << x << " round " << round;
      EXPECT_EQ(b, want(round)) << y << " round " << round;
    }
  }
}

// ---- the other blocking collectives -------------------------------------------

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

TEST(KoloLifecycleBlocking, BeforeInitTheCallIsRefused) {
  float x = 1, y = 2;
  EXPECT_EQ(kolo_allreduce("x", &x, &x, 1, KOLO_FLOAT32, KOLO_OP_SUM), KOLO_ERR_NOT_INITIALIZED);
  EXPECT_EQ(kolo_broadcast("x", &x, &y, 1, KOLO_FLOAT32, 0), KOLO_ERR_NOT_INITIALIZED);
  EXPECT_EQ(kolo_reducescatter("x", &x, &y, 1, 1, KOLO_FLOAT32, KOLO_OP_SUM),
            KOLO_ERR_NOT_INITIALIZED);
  kolo_handle_t h = reinterpret_cast<kolo_handle_t>(&x);
  EXPECT_EQ(kolo_allgather("x", &x, 1, 1, KOLO_FLOAT32, &h), KOLO_ERR_NOT_INITIALIZED);
  EXPECT_EQ(h, nullptr);
  h = reinterpret_cast<kolo_handle_t>(&x);
  EXPECT_EQ(kolo_alltoall("x", &x, 1, 1, nullptr, KOLO_FLOAT32, &h), KOLO_ERR_NOT_INITIALIZED);
  EXPECT_EQ(h, nullptr);
  EXPECT_EQ(x, 1.0f);
  EXPECT_EQ(y, 2.0f);
}

// A blocking call of `name` on four floats (its status; it may write them).
using BlockingCall = std::function<kolo_status_t(const char* name, std::vector<float>& x)>;

kolo_status_t blocking_allreduce(const char* name, std::vector<float>& x) {
  return kolo_allreduce(name, x.data(), x.data(), 4, KOLO_FLOAT32, KOLO_OP_SUM);
}

// Every rank calls `name` `warm` times; then rank 0 shuts kolo down while the
// others wait in a blocking call of it: they get KOLO_ERR_SHUTDOWN, their buffer
// as it was, and once their kolo has stopped too a call is refused at once.
void OthersWaitWhileRankZeroStops(const char* name, int warm,
                                  const BlockingCall& call = blocking_allreduce) {
  ASSERT_EQ(kolo_init(), KOLO_OK) << kolo_last_error();
  const int rank = kolo_rank();
  std::vector<float> x(4, 1.0f);
  for (int i = 0; i < warm; ++i) ASSERT_EQ(call(name, x), KOLO_OK) << kolo_last_error();
  const std::vector<float> before = x;
  world_barrier();
  if (rank == 0) {
    usleep(300 * 1000);  // the others are waiting by now (or will find kolo stopped)
    EXPECT_EQ(kolo_shutdown(), KOLO_OK);
  } else {
    EXPECT_EQ(call(name, x), KOLO_ERR_SHUTDOWN) << kolo_last_error();
    EXPECT_EQ(x, before);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (kolo_is_initialized() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    EXPECT_EQ(call("late", x), KOLO_ERR_SHUTDOWN);
    EXPECT_EQ(kolo_shutdown(), KOLO_OK);
  }
  world_barrier();
}

// A blocking call that waits for a name rank 0 never submits returns
// KOLO_ERR_SHUTDOWN when rank 0 shuts kolo down: it does not wait for ever.
TEST(KoloLifecycleBlocking, ACallWaitingForAPeerReturnsWhenKoloStops) {
  OthersWaitWhileRankZeroStops("never", 0);
}

// The same with a cached name, which the others call alone (Note [A call alone]
// in src/core/coordinator.h): rank 0's vector asks to stop, the vectors differ,
// and the call ends with the cycle that stops kolo.
TEST(KoloLifecycleBlocking, ACachedCallWaitingForAPeerReturnsWhenKoloStops) {
  OthersWaitWhileRankZeroStops("cached", 3);
}

// The same for a cached broadcast and a cached allgather (whose call leaves no
// handle behind when it fails).
TEST(KoloLifecycleBlocking, ACachedBroadcastOrAllgatherWaitingForAPeerReturnsWhenKoloStops) {
  OthersWaitWhileRankZeroStops("cached_bcast", 3, [](const char* name, std::vector<float>& x) {
    return kolo_broadcast(name, x.data(), x.data(), 4, KOLO_FLOAT32, 0);
  });
  OthersWaitWhileRankZeroStops("cached_gather", 3, [](const char* name, std::vector<float>& x) {
    kolo_handle_t h = reinterpret_cast<kolo_handle_t>(&x);
    const kolo_status_t s = kolo_allgather(name, x.data(), 4, 1, KOLO_FLOAT32, &h);
    if (s == KOLO_OK) {
      kolo_handle_release(h);
    } else {
      EXPECT_EQ(h, nullptr);
    }
    return s;
  });
}

}  // namespace
}  // namespace kolo_test
