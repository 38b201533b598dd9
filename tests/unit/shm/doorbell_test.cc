// The node doorbell (transports/shm/doorbell.h): a wake() for a rank's
// coordinator is never lost, whichever step of its announce-check-sleep the
// sleeper has reached when the wake comes (Note [A wake bumps the word only
// for a sleeper]); a ring reaches every other rank of the node and not the
// ringer. The doorbells live in node layers made over loopback worlds; a thread
// stands in for a coordinator. A lost wake shows as a wait that lasts its whole
// timeout.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <random>
#include <thread>

#include "tests/unit/algorithms/spawn.h"
#include "transports/shm/doorbell.h"
#include "transports/shm/node.h"

namespace kolo::shm {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kTimeout = std::chrono::seconds(5);  // far past any wake-up
constexpr uint64_t kNeverRung = uint64_t{1} << 40;  // no peer rings this cycle

// A node of one rank: the doorbell is its own.
std::unique_ptr<NodeDoorbell> own_doorbell() {
  std::vector<transport::World> worlds = loopback::create_worlds(1);
  std::shared_ptr<Node> node;
  Status s = Node::create(*worlds[0].control, NodeOptions{}, &node);
  EXPECT_TRUE(s.ok()) << s.to_string();
  std::unique_ptr<NodeDoorbell> bell;
  if (node) {
    EXPECT_TRUE(NodeDoorbell::create(node, &bell).ok());
  }
  return bell;
}

TEST(NodeDoorbell, AWakeIsNeverLostWhereverTheSleeperIs) {
  std::unique_ptr<NodeDoorbell> bell = own_doorbell();
  ASSERT_NE(bell, nullptr);
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
  std::mt19937 rng(static_cast<unsigned>(Clock::now().time_since_epoch().count()));
  for (int i = 1; i <= kRounds; ++i) {
    while (waiting_for.load() < i) std::this_thread::yield();
    for (uint32_t spin = rng() % 3 == 0 ? 0 : rng() % 4000; spin > 0; --spin) __builtin_ia32_pause();
    woken.store(i);
    bell->wake();
  }
  sleeper.join();
  EXPECT_LT(longest, kTimeout / 2) << "a wake was lost: a wait ran to its timeout";
}

// Rank 0 rings cycle 5: every other rank of the node hears it (a sleeper wakes
// early), rank 0 does not hear itself, and nobody hears cycle 6.
TEST(NodeDoorbell, ARingReachesEveryOtherRankOfTheNode) {
  kolo::testing::spawn(3, [](int rank, transport::World& world) {
    std::shared_ptr<Node> node;
    ASSERT_TRUE(Node::create(*world.control, NodeOptions{}, &node).ok());
    std::unique_ptr<NodeDoorbell> bell;
    ASSERT_TRUE(NodeDoorbell::create(node, &bell).ok());
    EXPECT_FALSE(bell->rung(5));
    ASSERT_TRUE(world.control->barrier().ok());
    if (rank == 0) {
      bell->ring(5);
    } else {
      const auto start = Clock::now();
      while (!bell->rung(5) && Clock::now() - start < kTimeout) {
        bell->wait(5, std::chrono::duration_cast<std::chrono::microseconds>(kTimeout),
                   [] { return false; });
      }
      EXPECT_LT(Clock::now() - start, kTimeout) << "the ring did not wake the sleeper";
      EXPECT_TRUE(bell->rung(4));
    }
    ASSERT_TRUE(world.control->barrier().ok());
    EXPECT_EQ(bell->rung(5), rank != 0);
    EXPECT_FALSE(bell->rung(6));
  });
}

}  // namespace
}  // namespace kolo::shm
