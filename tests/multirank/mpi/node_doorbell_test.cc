// The node doorbell (transports/mpi/node_doorbell.h): a wake() for a rank's
// coordinator is never lost, whichever step of its announce-check-sleep the
// sleeper has reached when the wake comes (Note [A wake bumps the word only
// for a sleeper]). Each rank tests its own doorbell, in a window over a copy of
// MPI_COMM_SELF; a thread stands in for the coordinator. A lost wake shows as a
// wait that lasts its whole timeout.
#include <gtest/gtest.h>
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <random>
#include <thread>

#include "tests/multirank/mpi/mpi_test_world.h"  // initialises MPI (through kolo's world)
#include "transports/mpi/node_doorbell.h"

namespace kolo::mpi {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kTimeout = std::chrono::seconds(5);  // far past any wake-up
constexpr uint64_t kNeverRung = uint64_t{1} << 40;  // no peer rings this cycle

TEST(NodeDoorbell, AWakeIsNeverLostWhereverTheSleeperIs) {
  MPI_Comm self = MPI_COMM_NULL;
  ASSERT_EQ(MPI_Comm_dup(MPI_COMM_SELF, &self), MPI_SUCCESS);
  std::unique_ptr<NodeDoorbell> bell;
  ASSERT_TRUE(NodeDoorbell::create(self, nullptr, &bell).ok());
  constexpr int kRounds = 4000;
  std::atomic<int> waiting_for{0};  // the sleeper waits for wake number...
  std::atomic<int> woken{0};        // wakes given, counted before each wake()
  Clock::duration longest{};
  std::thread sleeper([&] {
    for (int i = 1; i <= kRounds; ++i) {
      waiting_for.store(i);
      // A wait may return early; it waits again until wake i has come.
      while (woken.load() < i) {
        const auto start = Clock::now();
        bell->wait(kNeverRung, std::chrono::duration_cast<std::chrono::microseconds>(kTimeout),
                   [] { return false; });
        longest = std::max(longest, Clock::now() - start);
      }
    }
  });
  // Wakes at every distance from the sleeper's announce: at once, after a few
  // hundred nanoseconds (inside its checks), after microseconds (asleep).
  std::mt19937 rng(static_cast<unsigned>(MPI_Wtime() * 1e6));
  for (int i = 1; i <= kRounds; ++i) {
    while (waiting_for.load() < i) std::this_thread::yield();
    for (uint32_t spin = rng() % 3 == 0 ? 0 : rng() % 4000; spin > 0; --spin) __builtin_ia32_pause();
    woken.store(i);
    bell->wake();
  }
  sleeper.join();
  EXPECT_LT(longest, kTimeout / 2) << "a wake was lost: a wait ran to its timeout";
  bell.reset();
  MPI_Comm_free(&self);
}

}  // namespace
}  // namespace kolo::mpi
