// Shared harness for the C API tests under mpiexec (or started as a socket-world
// job by tests/socket/socket_launch.py: world_barrier.h): the test program owns MPI
// (MPI_THREAD_MULTIPLE, so tests may call MPI_Barrier beside kolo's coordinator)
// and each test initialises kolo on it and shuts it down again — which also
// exercises kolo_init on a caller-initialised MPI, repeatedly.
#pragma once

#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "api_dtypes.h"
#include "kolo/kolo.h"
#include "multirank/world_barrier.h"
#include "read_file.h"

namespace kolo_test {

class MpiEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
    ASSERT_EQ(provided, MPI_THREAD_MULTIPLE);
  }
  void TearDown() override { MPI_Finalize(); }
};

// After kolo_init: kolo's world holds every rank of the job. In a socket-world job
// each rank's MPI is a world of one, so a kolo that fell back to MPI would have
// size 1 here, not the launcher's WORLD_SIZE.
inline ::testing::AssertionResult joined_the_whole_job() {
  if (kolo_size() == job_size()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "kolo_init formed a world of " << kolo_size()
                                       << " ranks, the job has " << job_size()
                                       << (socket_job() ? " (the socket world's WORLD_SIZE)" : "");
}

class KoloTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(kolo_init(), KOLO_OK) << kolo_last_error();
    rank_ = kolo_rank();
    size_ = kolo_size();
    ASSERT_TRUE(joined_the_whole_job());
  }
  // One rank's kolo_shutdown stops kolo on every rank (KOLO_ERR_SHUTDOWN from then
  // on), so a rank must not shut down while another is still in the test: where
  // a test's last calls are local (refusals, queries), a fast rank's TearDown
  // failed a slow rank's calls. The barrier waits for every rank's test body.
  void TearDown() override {
    world_barrier();
    EXPECT_EQ(kolo_shutdown(), KOLO_OK);
  }

  int rank_ = -1;
  int size_ = -1;
};

// Every kolo dtype, for typed tests (TYPED_TEST_SUITE(Suite, AllDtypes)).
using AllDtypes = ::testing::Types<
    kolo_test_types::Plain<uint8_t, KOLO_UINT8>, kolo_test_types::Plain<int8_t, KOLO_INT8>,
    kolo_test_types::Plain<uint16_t, KOLO_UINT16>, kolo_test_types::Plain<int16_t, KOLO_INT16>,
    kolo_test_types::Plain<int32_t, KOLO_INT32>, kolo_test_types::Plain<int64_t, KOLO_INT64>,
    kolo_test_types::Half, kolo_test_types::Bf16, kolo_test_types::Plain<float, KOLO_FLOAT32>,
    kolo_test_types::Plain<double, KOLO_FLOAT64>, kolo_test_types::Bool>;

inline kolo_device_t cpu() {
  kolo_device_t d;
  d.kind = KOLO_DEVICE_CPU;
  d.index = 0;
  d.stream = nullptr;
  return d;
}

// kolo_wait with the tests' 120 s limit. A wait that times out leaves the handle
// live: kolo may still write buffers the test is about to free (in CI a timed-out
// test went on to "malloc(): unaligned tcache chunk"). So it stops the job
// there, naming the handle's operation, instead of returning KOLO_ERR_TIMEOUT.
inline kolo_status_t wait_or_abort(kolo_handle_t h, const std::string& what = "an operation") {
  const kolo_status_t s = kolo_wait(h, 120.0);
  if (s == KOLO_ERR_TIMEOUT) {
    std::fprintf(stderr, "[rank %d] %s not done after 120 s; aborting\n", kolo_rank(),
                 what.c_str());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  return s;
}

// Every rank's `bytes` bytes at `data`, in rank order, through kolo's allgather
// (for references the tests compute themselves, on either world). Every rank
// passes the same `bytes`; kolo must be running.
inline std::vector<char> allgather_bytes(const std::string& name, const void* data, size_t bytes) {
  std::vector<char> all;
  kolo_handle_t h = nullptr;
  const kolo_status_t s = kolo_allgather_async(name.c_str(), data, static_cast<int64_t>(bytes), 1,
                                               KOLO_UINT8, cpu(), &h);
  EXPECT_EQ(s, KOLO_OK) << kolo_last_error();
  if (s != KOLO_OK) return all;
  EXPECT_EQ(wait_or_abort(h, "allgather of \"" + name + "\""), KOLO_OK) << kolo_handle_message(h);
  const void* out = nullptr;
  int64_t out_bytes = 0;
  if (kolo_handle_output(h, &out, &out_bytes) == KOLO_OK &&
      out_bytes == static_cast<int64_t>(bytes) * kolo_size()) {
    all.assign(static_cast<const char*>(out), static_cast<const char*>(out) + out_bytes);
  } else {
    ADD_FAILURE() << "allgather of \"" << name << "\": " << out_bytes << " bytes, not "
                  << bytes << " from each of " << kolo_size() << " ranks";
  }
  kolo_handle_release(h);
  return all;
}

// Enqueues, waits, returns the status; the handle's message goes to *message.
inline kolo_status_t allreduce(const std::string& name, const void* in, void* out, int64_t count,
                               kolo_dtype_t dtype, kolo_op_t op, std::string* message = nullptr,
                               double prescale = 1.0, double postscale = 1.0) {
  kolo_handle_t h = nullptr;
  kolo_status_t s = kolo_allreduce_async(name.c_str(), in, out, count, dtype, op, prescale,
                                         postscale, cpu(), &h);
  if (s != KOLO_OK) {
    if (message) *message = kolo_last_error();
    return s;
  }
  s = wait_or_abort(h, "allreduce of \"" + name + "\"");
  if (message) *message = kolo_handle_message(h);
  kolo_handle_release(h);
  return s;
}

// The last rank's side of a peer that says more (blocking_api_test,
// blocking_collectives_api_test): with both handles submitted, it lets its
// coordinator run a cycle saying both, meets the others, and waits for `a`, then `b`.
inline void meet_then_wait(kolo_handle_t a, const std::string& a_name, kolo_handle_t b,
                           const std::string& b_name) {
  usleep(20 * 1000);  // its coordinator has run a cycle saying both by now
  world_barrier();
  ASSERT_EQ(wait_or_abort(a, a_name), KOLO_OK) << kolo_handle_message(a);
  ASSERT_EQ(wait_or_abort(b, b_name), KOLO_OK) << kolo_handle_message(b);
}

}  // namespace kolo_test
