// kolo.h's promise that nothing aborts on bad input, entry point by entry point:
// a NULL handle, a NULL out-pointer, a negative length or a NaN timeout is refused
// with KOLO_ERR_INVALID_ARGUMENT and a message naming the argument; a call that
// produces a handle leaves *handle NULL whenever it fails; kolo_init says which of
// "already initialised" and "shut down by another rank" it met.
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "api_fixture.h"

namespace kolo_test {
namespace {

const ::testing::Environment* const kMpi = ::testing::AddGlobalTestEnvironment(new MpiEnvironment);

// A handle value no call may leave behind on failure (never dereferenced).
const kolo_handle_t kStale = reinterpret_cast<kolo_handle_t>(uintptr_t{0x10});

bool last_error_names(const std::string& what) {
  return std::string(kolo_last_error()).find(what) != std::string::npos;
}

// A completed allgather of one row per rank: a handle with outputs and splits.
kolo_handle_t finished_allgather(const char* name, int32_t* row) {
  kolo_handle_t h = nullptr;
  EXPECT_EQ(kolo_allgather_async(name, row, 1, 1, KOLO_INT32, cpu(), &h), KOLO_OK)
      << kolo_last_error();
  EXPECT_EQ(wait_or_abort(h), KOLO_OK) << kolo_handle_message(h);
  return h;
}

TEST_F(KoloTest, HandleFunctionsRefuseANullHandle) {
  int done = 7;
  EXPECT_EQ(kolo_poll(nullptr, &done), KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(last_error_names("handle")) << kolo_last_error();
  EXPECT_EQ(done, 7);
  EXPECT_EQ(kolo_wait(nullptr, 1.0), KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kolo_handle_status(nullptr), KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_STREQ(kolo_handle_message(nullptr), "");
  const void* data = &done;
  int64_t bytes = 5;
  EXPECT_EQ(kolo_handle_output(nullptr, &data, &bytes), KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(data, &done);
  EXPECT_EQ(bytes, 5);
  int64_t splits[4] = {9, 9, 9, 9};
  EXPECT_EQ(kolo_handle_splits(nullptr, splits, 4), KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(last_error_names("handle")) << kolo_last_error();
  EXPECT_EQ(splits[0], 9);
  EXPECT_EQ(kolo_handle_stream_wait(nullptr, nullptr), KOLO_ERR_INVALID_ARGUMENT);
  kolo_handle_release(nullptr);  // ignored
}

// kolo_handle_splits(h, NULL, 4) wrote through NULL.
TEST_F(KoloTest, NullOutPointersAndNegativeLengthsAreRefusedByName) {
  int32_t row = rank_;
  kolo_handle_t h = finished_allgather("splits", &row);
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(kolo_handle_splits(h, nullptr, 4), KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(last_error_names("splits is NULL")) << kolo_last_error();
  int64_t splits[4] = {9, 9, 9, 9};
  EXPECT_EQ(kolo_handle_splits(h, splits, -1), KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(last_error_names("n is negative")) << kolo_last_error();
  EXPECT_EQ(splits[0], 9);
  EXPECT_EQ(kolo_handle_splits(h, nullptr, 0), KOLO_OK);  // nothing to copy
  EXPECT_EQ(kolo_handle_splits(h, splits, 1), KOLO_OK);
  EXPECT_EQ(splits[0], 1);
  EXPECT_EQ(splits[1], 9);
  EXPECT_EQ(kolo_poll(h, nullptr), KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(last_error_names("done")) << kolo_last_error();
  EXPECT_EQ(kolo_handle_output(h, nullptr, nullptr), KOLO_OK);  // both optional
  EXPECT_EQ(kolo_wait(h, std::nan("")), KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(last_error_names("timeout")) << kolo_last_error();
  // A timeout too large for the clock waits like a negative one (here: not at all).
  EXPECT_EQ(kolo_wait(h, 1e300), KOLO_OK);
  EXPECT_EQ(kolo_wait(h, std::numeric_limits<double>::infinity()), KOLO_OK);
  kolo_handle_release(h);
}

// Every call that produces a handle: *handle is NULL after any failure, whichever
// check failed (a NULL name used to leave it unchanged).
TEST_F(KoloTest, EveryFailedSubmissionLeavesTheHandleNull) {
  float x[4] = {1, 2, 3, 4};
  const int64_t splits[4] = {0, 0, 0, 0};
  std::vector<kolo_handle_t> h(12, kStale);
  EXPECT_EQ(kolo_allreduce_async(nullptr, x, x, 4, KOLO_FLOAT32, KOLO_OP_SUM, 1, 1, cpu(), &h[0]),
            KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(last_error_names("name is NULL")) << kolo_last_error();
  EXPECT_EQ(kolo_allgather_async(nullptr, x, 1, 1, KOLO_FLOAT32, cpu(), &h[1]),
            KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kolo_broadcast_async(nullptr, x, x, 4, KOLO_FLOAT32, 0, cpu(), &h[2]),
            KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kolo_alltoall_async(nullptr, x, 0, 1, splits, KOLO_FLOAT32, cpu(), &h[3]),
            KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kolo_reducescatter_async(nullptr, x, x, 4, 1, KOLO_FLOAT32, KOLO_OP_SUM, 1, 1, cpu(),
                                     &h[4]),
            KOLO_ERR_INVALID_ARGUMENT);
  const char* names[2] = {"g0", nullptr};
  const void* ins[2] = {x, x + 2};
  void* outs[2] = {x, x + 2};
  const int64_t counts[2] = {2, 2};
  EXPECT_EQ(kolo_grouped_allreduce_async(-1, names, ins, outs, counts, KOLO_FLOAT32, KOLO_OP_SUM, 1,
                                         1, cpu(), &h[5]),
            KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(last_error_names("n is negative")) << kolo_last_error();
  EXPECT_EQ(kolo_grouped_allreduce_async(2, nullptr, ins, outs, counts, KOLO_FLOAT32, KOLO_OP_SUM,
                                         1, 1, cpu(), &h[6]),
            KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kolo_grouped_allreduce_async(2, names, ins, outs, counts, KOLO_FLOAT32, KOLO_OP_SUM, 1,
                                         1, cpu(), &h[7]),
            KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(last_error_names("names[1] is NULL")) << kolo_last_error();
  // Checks further in (validation, duplicate names) leave it NULL too.
  EXPECT_EQ(kolo_allreduce_async("neg", x, x, -1, KOLO_FLOAT32, KOLO_OP_SUM, 1, 1, cpu(), &h[8]),
            KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kolo_broadcast_async("root", x, x, 4, KOLO_FLOAT32, size_, cpu(), &h[9]),
            KOLO_ERR_INVALID_ARGUMENT);
  for (size_t i = 0; i < 10; ++i) EXPECT_EQ(h[i], nullptr) << "call " << i;
  // A NULL handle pointer is refused by name, and nothing is enqueued.
  EXPECT_EQ(kolo_allreduce_async("nohandle", x, x, 4, KOLO_FLOAT32, KOLO_OP_SUM, 1, 1, cpu(),
                                 nullptr),
            KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(last_error_names("handle")) << kolo_last_error();
  EXPECT_EQ(kolo_barrier(), KOLO_OK);  // every rank is still in step
}

TEST(KoloAbi, LookupsTakeAnyValue) {
  EXPECT_STREQ(kolo_status_string(static_cast<kolo_status_t>(99)), "KOLO_ERR_UNKNOWN");
  EXPECT_STREQ(kolo_status_string(static_cast<kolo_status_t>(-1)), "KOLO_ERR_UNKNOWN");
  EXPECT_EQ(kolo_dtype_size(static_cast<kolo_dtype_t>(99)), 0u);
  EXPECT_EQ(kolo_dtype_size(static_cast<kolo_dtype_t>(-1)), 0u);
  const char* reason = nullptr;
  EXPECT_EQ(kolo_transport_built(nullptr, &reason), 0);
  EXPECT_NE(reason, nullptr);
  EXPECT_EQ(kolo_transport_built("mpi", nullptr), 1);
  EXPECT_EQ(kolo_reducescatter_shard_rows(-1, 0, 2), -1);
  EXPECT_EQ(kolo_reducescatter_shard_rows(5, 2, 2), -1);
  EXPECT_NE(kolo_build_info_json(), nullptr);
  EXPECT_EQ(kolo_join(nullptr), KOLO_ERR_NOT_INITIALIZED);
  EXPECT_EQ(kolo_barrier(), KOLO_ERR_NOT_INITIALIZED);
  kolo_handle_t h = kStale;
  float x = 1;
  EXPECT_EQ(kolo_allreduce_async(nullptr, &x, &x, 1, KOLO_FLOAT32, KOLO_OP_SUM, 1, 1, cpu(), &h),
            KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(h, nullptr);
}

// A Fortran handle is an MPI_Fint; one that does not fit is refused rather than
// truncated into some other communicator (here: MPI_COMM_WORLD's).
TEST(KoloAbi, InitCommRefusesAHandleThatIsNotAnMpiFint) {
  const int64_t world = MPI_Comm_c2f(MPI_COMM_WORLD);
  EXPECT_EQ(kolo_init_comm((int64_t{1} << 32) + world), KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(last_error_names("Fortran")) << kolo_last_error();
  EXPECT_EQ(kolo_is_initialized(), 0);
  ASSERT_EQ(kolo_init_comm(world), KOLO_OK) << kolo_last_error();
  EXPECT_EQ(kolo_shutdown(), KOLO_OK);
}

// kolo_init while initialised here is KOLO_ERR_ALREADY_INITIALIZED; after another
// rank's shutdown stopped kolo here, it is KOLO_ERR_SHUTDOWN until this rank calls
// kolo_shutdown too (it used to be KOLO_ERR_ALREADY_INITIALIZED for both).
TEST(KoloLifecycle, InitTellsAlreadyInitialisedFromShutDownByAnotherRank) {
  ASSERT_EQ(kolo_init(), KOLO_OK) << kolo_last_error();
  EXPECT_EQ(kolo_init(), KOLO_ERR_ALREADY_INITIALIZED);
  EXPECT_TRUE(last_error_names("already initialised")) << kolo_last_error();
  EXPECT_EQ(kolo_is_initialized(), 1);
  world_barrier();
  if (kolo_rank() == 0) {
    EXPECT_EQ(kolo_shutdown(), KOLO_OK);
  } else {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (kolo_is_initialized() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    ASSERT_EQ(kolo_is_initialized(), 0);
    EXPECT_EQ(kolo_init(), KOLO_ERR_SHUTDOWN);
    EXPECT_TRUE(last_error_names("shut down by another rank")) << kolo_last_error();
    EXPECT_EQ(kolo_init(), KOLO_ERR_SHUTDOWN);  // until this rank shuts down too
    EXPECT_EQ(kolo_shutdown(), KOLO_OK);
  }
  world_barrier();
  ASSERT_EQ(kolo_init(), KOLO_OK) << kolo_last_error();
  EXPECT_EQ(kolo_barrier(), KOLO_OK);
  EXPECT_EQ(kolo_shutdown(), KOLO_OK);
}

}  // namespace
}  // namespace kolo_test
