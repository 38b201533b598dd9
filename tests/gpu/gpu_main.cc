// main() for the device tests, run under mpiexec: initialises kolo once (kolo
// initialises MPI itself), runs every test on every rank, shuts kolo down.
//
// Only rank 0 prints GoogleTest's progress; other ranks print their failures. The
// exit code is non-zero on any rank with a failure, so mpiexec reports it. Rank 0
// ends with one line that tools/gpu_kit.sh and CTest read:
//   kolo-gpu-tests: <program> np=<ranks> passed <P> failed <F> skipped <S>
// and, when every test skipped, a line "kolo-gpu-tests: all tests skipped: <why>"
// (CTest's SKIP_REGULAR_EXPRESSION turns that into a skipped test).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "gpu_support.h"
#include "kolo/kolo.h"

namespace {

// Prints only failed assertions, with the rank, for ranks other than 0.
class FailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit FailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (r.failed())
      std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", rank_,
                   r.file_name() ? r.file_name() : "?", r.line_number(), r.summary());
  }

 private:
  int rank_;
};

std::string program_name(const char* argv0) {
  std::string s = argv0 ? argv0 : "?";
  const size_t slash = s.rfind('/');
  return slash == std::string::npos ? s : s.substr(slash + 1);
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const kolo_status_t init = kolo_init();
  if (init != KOLO_OK) {
    std::fprintf(stderr, "kolo-gpu-tests: kolo_init failed: %s: %s\n", kolo_status_string(init),
                 kolo_last_error());
    return 1;
  }
  const int rank = kolo_rank();
  if (rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new FailurePrinter(rank));
  }
  // Before the tests, since a test's failure may leave CUDA in an error state.
  const std::string why = kolo_gpu_test::why_not_runnable();

  const int rc = RUN_ALL_TESTS();

  const auto* unit = ::testing::UnitTest::GetInstance();
  if (rank == 0) {
    std::printf("kolo-gpu-tests: %s np=%d passed %d failed %d skipped %d\n",
                program_name(argv[0]).c_str(), kolo_size(), unit->successful_test_count(),
                unit->failed_test_count(), unit->skipped_test_count());
    if (unit->successful_test_count() == 0 && unit->failed_test_count() == 0 &&
        unit->skipped_test_count() > 0)
      std::printf("kolo-gpu-tests: all tests skipped: %s\n",
                  why.empty() ? "(each test gave its reason)" : why.c_str());
    std::fflush(stdout);
  }
  // One rank's shutdown ends kolo on every rank: wait until all have run their tests.
  const kolo_status_t barrier = kolo_barrier();
  if (barrier != KOLO_OK)
    std::fprintf(stderr, "kolo-gpu-tests: kolo_barrier before shutdown failed: %s: %s\n",
                 kolo_status_string(barrier), kolo_last_error());
  const kolo_status_t down = kolo_shutdown();
  if (down != KOLO_OK) {
    std::fprintf(stderr, "kolo-gpu-tests: kolo_shutdown failed: %s: %s\n",
                 kolo_status_string(down), kolo_last_error());
    return 1;
  }
  return rc;
}
