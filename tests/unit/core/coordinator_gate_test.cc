// CycleGate (src/core/coordinator_gate.h): Note [The coordinator dozes while
// waiters run cycles]. A helper that leaves with its handle done keeps the
// coordinator dozing (helped_within); one that leaves it undone ends the doze at
// once, whichever of the two comes first. Orders are forced by the calls' order
// and by joins, never by a sleep; a doze that is not ended would sleep its whole
// (long) timeout.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

#include "core/coordinator_gate.h"

namespace kolo::core {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kLong = std::chrono::microseconds(60 * 1000 * 1000);
const auto kNoDeadline = Clock::time_point::max();

TEST(CycleGate, AHelperWhoseHandleIsDoneLeavesTheCoordinatorDozing) {
  CycleGate gate(nullptr);  // detached: help() runs no cycle
  EXPECT_FALSE(gate.helped_within(std::chrono::hours(1)));
  HandleState handle;
  handle.complete(Status::OK());
  gate.help(handle, kNoDeadline);
  EXPECT_FALSE(gate.helping());
  EXPECT_TRUE(gate.helped_within(std::chrono::hours(1)));
  EXPECT_FALSE(gate.helped_within(std::chrono::microseconds(0)));
}

TEST(CycleGate, AHelperThatLeavesItsHandleUndoneEndsTheDoze) {
  CycleGate gate(nullptr);
  HandleState handle;  // never completed: help() gives up at once (detached)
  const auto start = Clock::now();
  bool handed_back = false;
  std::thread coordinator([&] { handed_back = gate.doze(kLong); });
  while (!gate.dozing()) std::this_thread::yield();  // asleep in the doze now
  gate.help(handle, kNoDeadline);
  coordinator.join();
  EXPECT_TRUE(handed_back) << "doze() must say so: the coordinator stops dozing";
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(30)) << "the doze was not ended";
  EXPECT_FALSE(gate.helped_within(std::chrono::hours(1)));  // the coordinator takes over
}

TEST(CycleGate, AHandBackBeforeTheDozeIsKept) {
  CycleGate gate(nullptr);
  HandleState handle;
  gate.help(handle, kNoDeadline);  // hands back before anyone dozes
  const auto start = Clock::now();
  EXPECT_TRUE(gate.doze(kLong));
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(30));
  // Taken: the next doze sleeps its time again (a short one here), and says so.
  const auto again = Clock::now();
  EXPECT_FALSE(gate.doze(std::chrono::microseconds(1000)));
  EXPECT_GE(Clock::now() - again, std::chrono::microseconds(1000));
}

// The coordinator's doze length (WaitFor::kDoze, Coordinator::doze_while_helped):
// dozes that begin while nobody helps lengthen (100, 200, 400, 800, 800 us)
// instead of waking the coordinator every 100 us between operations; one that
// begins while a thread helps is short again (restart()), and the idle ones
// after it lengthen from there.
TEST(DozeLength, IdleDozesLengthenAndHelpedOnesStartShort) {
  Waiter length(WaitPolicy().profile(WaitFor::kDoze));
  auto next = [&length](bool helping) {
    if (helping) length.restart();
    return std::chrono::duration_cast<std::chrono::microseconds>(length.take_sleep()).count();
  };
  std::vector<int64_t> got;
  for (int i = 0; i < 5; ++i) got.push_back(next(false));
  EXPECT_EQ(got, (std::vector<int64_t>{100, 200, 400, 800, 800}));
  EXPECT_EQ(next(true), 100);
  EXPECT_EQ(next(false), 200);
  EXPECT_EQ(next(false), 400);
  EXPECT_EQ(next(true), 100);
  EXPECT_EQ(next(true), 100);
  EXPECT_EQ(next(false), 200);
  // A doze that ends while a thread still helps is followed by one twice as long,
  // up to the longest.
  const WaitProfile& doze = WaitPolicy().profile(WaitFor::kDoze);
  EXPECT_EQ(doze.after(std::chrono::microseconds(400)), std::chrono::microseconds(800));
  EXPECT_EQ(doze.after(std::chrono::microseconds(800)), std::chrono::microseconds(800));
}

}  // namespace
}  // namespace kolo::core
