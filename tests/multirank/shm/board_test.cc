// The node's board (transports/shm/board.h) across processes under mpiexec (one
// node): ranks stopped together past the timeout and resumed one after the other
// (a paused host, a paused VM) do not blame each other for the time all were
// away (Note [Silence is counted only while this process listens] in
// transport/liveness.h).
#include <gtest/gtest.h>
#include <mpi.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/multirank/mpi/mpi_test_world.h"
#include "transports/shm/board.h"
#include "transports/shm/node.h"

namespace kolo::shm {
namespace {

using mpi::testing::test_world;
using Clock = std::chrono::steady_clock;

int rank() { return test_world().control->topology().rank; }

// Every rank is stopped for three timeouts; rank 0 is resumed first and the
// others half a timeout later. Without the rule, rank 0 sees the others' beats
// older than the timeout the moment it runs again.
TEST(NodeBoard, RanksStoppedTogetherDoNotBlameEachOther) {
  constexpr auto kTimeout = std::chrono::milliseconds(400);
  std::shared_ptr<Node> node;
  Status s = Node::create(*test_world().control, NodeOptions{}, &node);
  ASSERT_TRUE(s.ok()) << s.to_string();
  std::unique_ptr<NodeBoard> board;
  ASSERT_TRUE(NodeBoard::create(node, kTimeout, &board).ok());
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  std::vector<int> pids(static_cast<size_t>(size));
  const int mine = static_cast<int>(getpid());
  MPI_Allgather(&mine, 1, MPI_INT, pids.data(), 1, MPI_INT, MPI_COMM_WORLD);
  MPI_Barrier(MPI_COMM_WORLD);
  pid_t pauser = -1;
  if (rank() == 0) {
    pauser = fork();
    ASSERT_GE(pauser, 0);
    if (pauser == 0) {  // stops every rank, then resumes rank 0 first
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      for (int r = size - 1; r >= 0; --r) kill(pids[static_cast<size_t>(r)], SIGSTOP);
      std::this_thread::sleep_for(3 * kTimeout);
      kill(pids[0], SIGCONT);
      std::this_thread::sleep_for(kTimeout / 2);
      for (int r = 1; r < size; ++r) kill(pids[static_cast<size_t>(r)], SIGCONT);
      _exit(0);
    }
  }
  // Checks through the pause and for well over a timeout after it.
  const auto until = Clock::now() + 3 * kTimeout + std::chrono::milliseconds(1800);
  Status seen;
  while (seen.ok() && Clock::now() < until) {
    seen = board->check();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  if (pauser > 0) {
    int status = 0;
    waitpid(pauser, &status, 0);
  }
  EXPECT_TRUE(seen.ok()) << "rank " << rank() << ": " << seen.to_string();
  MPI_Barrier(MPI_COMM_WORLD);
}

}  // namespace
}  // namespace kolo::shm
