// The blocking allreduce (kolo_allreduce, kolo_allreduce_ex) through the C API:
// the same results, bit for bit, as the asynchronous call for every dtype, op and
// size (cached and carried, past the carry, past the shm engine's one round);
// the same refusals and errors, on every rank; a name in flight refused at once;
// blocking and asynchronous calls from several threads at once; and a blocking
// call that waits for a peer returns when kolo stops, also a cached blocking
// broadcast and allgather (the other collectives' blocking forms:
// blocking_collectives_api_test.cc). Where a waiter may run the cycle (one node,
// host memory) the call enters the cycle without the queue (Note [A blocking call
// enters the cycle] in src/core/coordinator_gate.h); elsewhere it submits and waits.
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
