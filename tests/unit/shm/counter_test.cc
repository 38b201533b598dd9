// Counters in shared memory (transports/shm/counter.h): a reader asleep in the
// kernel is woken by the writer's publish, and no interleaving of the reader's
// announce-check-sleep with the writer's store-check-wake loses the wake-up. Threads stand in for the node's processes
// (the futex is not private, so the same code serves both). Every order is forced
// by the sleepers word or by the order of the calls, never by a sleep; a lost
// wake-up would show as a reader that sleeps its whole (long) timeout.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "transports/shm/counter.h"

namespace kolo::shm {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int64_t kLongUs = 60 * 1000 * 1000;  // far past any wake-up

// A counter on its own line, as the layout contract asks.
struct alignas(64) Line {
  uint64_t words[8] = {};
};

uint32_t sleepers(const Line& line) {
  return __atomic_load_n(reinterpret_cast<const uint32_t*>(&line.words[1]), __ATOMIC_SEQ_CST);
}

void wait_until_asleep(const Line& line) {
  while (sleepers(line) == 0) std::this_thread::yield();
}

TEST(Counter, PublishWakesAReaderAsleepOnTheCounter) {
  Line line;
  std::atomic<bool> returned{false};
  std::thread reader([&] {
    sleep_on_counter(&line.words[0], 0, kLongUs);
    returned.store(true);
  });
  wait_until_asleep(line);  // announced: asleep, or about to compare and sleep
  const auto start = Clock::now();
  publish_counter(&line.words[0], 1);
  reader.join();
  EXPECT_TRUE(returned.load());
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(30)) << "the wake-up was lost";
  EXPECT_EQ(sleepers(line), 0u);
}

TEST(Counter, APublishBeforeTheSleepIsNotMissed) {
  // The writer stores (and sees no sleeper) before the reader announces itself:
  // the reader's check after announcing must see the value and not sleep.
  Line line;
  publish_counter(&line.words[0], 1);
  const auto start = Clock::now();
  sleep_on_counter(&line.words[0], 0, kLongUs);
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(30));
}

TEST(Counter, EveryReaderIsWoken) {
  Line line;
  std::thread a([&] { sleep_on_counter(&line.words[0], 0, kLongUs); });
  std::thread b([&] { sleep_on_counter(&line.words[0], 0, kLongUs); });
  while (sleepers(line) < 2) std::this_thread::yield();
  const auto start = Clock::now();
  publish_counter(&line.words[0], 5);
  a.join();
  b.join();
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(30));
}

TEST(Counter, WaitForCounterSleepsAfterItsYieldsUntilPublished) {
  Line line;
  std::atomic<bool> done{false};
  std::thread reader([&] {
    EXPECT_TRUE(wait_for_counter(&line.words[0], 3, 1, nullptr).ok());
    done.store(true);
  });
  wait_until_asleep(line);
  publish_counter(&line.words[0], 2);  // not yet the target: the reader sleeps on
  publish_counter(&line.words[0], 3);
  reader.join();
  EXPECT_TRUE(done.load());
}

}  // namespace
}  // namespace kolo::shm
