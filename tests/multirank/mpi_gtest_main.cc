// main() for tests that run under mpiexec: every rank runs every test; only rank 0
// prints GoogleTest's progress (the others print failures only). The exit code is
// non-zero on any rank that failed, so mpiexec reports the failure.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace {

int rank_from_env() {
  for (const char* var : {"PMI_RANK", "MPI_LOCALRANKID", "OMPI_COMM_WORLD_RANK"}) {
    if (const char* v = std::getenv(var)) return std::atoi(v);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (rank_from_env() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    // Keep failures visible on every rank, drop the progress lines.
    ::testing::GTEST_FLAG(brief) = true;
    (void)listeners;
  }
  return RUN_ALL_TESTS();
}
