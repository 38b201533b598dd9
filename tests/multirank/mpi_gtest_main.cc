// main() for tests that run under mpiexec: every rank runs every test; only rank 0
// prints GoogleTest's progress (the others print failures only). The exit code is
// non-zero on any rank that failed, so mpiexec reports the failure.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

int rank_from_env() {
  // RANK: a socket-world job without mpiexec (tests/socket/socket_launch.py).
  for (const char* var : {"PMI_RANK", "MPI_LOCALRANKID", "OMPI_COMM_WORLD_RANK", "RANK"}) {
    if (const char* v = std::getenv(var)) return std::atoi(v);
  }
  return 0;
}

// Prints only failed assertions, with the rank, for ranks other than 0.
class FailurePrinter : public ::testing::EmptyTestEventListener {
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (r.failed())
      std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", rank_from_env(),
                   r.file_name() ? r.file_name() : "?", r.line_number(), r.summary());
  }
};

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (rank_from_env() != 0) {
    // Drop the progress printer on other ranks; failures still reach stderr through
    // the assertion messages' own output below.
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new FailurePrinter);
  }
  return RUN_ALL_TESTS();
}
