// Note [A cached operation's storage is reused] (coordinator.h): the tables
// that keep the nodes of finished entries must behave exactly as fresh ones.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "core/negotiator.h"
#include "core/pending.h"
#include "core/tensor_queue.h"
#include "transports/loopback/loopback_world.h"

namespace kolo::core {
namespace {

TensorEntry entry(const std::string& name, int64_t count = 4) {
  TensorEntry e;
  e.request.name = name;
  e.request.params.count = count;
  e.handle = std::make_shared<HandleState>();
  return e;
}

// Names longer than the string's inline buffer, as real tensor names are.
std::string long_name(const std::string& tag) { return "model/layer_" + tag + "/weight/grad"; }

TEST(Pending, ReusedNodesHoldTheNewEntry) {
  Pending pending;
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 4; ++i) {
      TensorEntry e = entry(long_name(std::to_string(round * 10 + i)), round * 10 + i);
      ASSERT_TRUE(pending.emplace(e.request.name, std::move(e)));
    }
    ASSERT_EQ(pending.size(), 4u);
    for (int i = 0; i < 4; ++i) {
      auto it = pending.find(long_name(std::to_string(round * 10 + i)));
      ASSERT_NE(it, pending.end());
      EXPECT_EQ(it->first, it->second.request.name);
      EXPECT_EQ(it->second.request.params.count, round * 10 + i);
    }
    EXPECT_EQ(pending.find(long_name(std::to_string(round * 10 - 1))), pending.end());
    while (!pending.empty()) pending.erase(pending.begin());
  }
}

TEST(Pending, ADuplicateNameIsRefusedAndTheEntryLeftAlone) {
  Pending pending;
  ASSERT_TRUE(pending.emplace("a", entry("a", 1)));
  TensorEntry again = entry("a", 2);
  EXPECT_FALSE(pending.emplace("a", std::move(again)));  // no spare node yet
  EXPECT_EQ(again.request.name, "a");
  EXPECT_NE(again.handle, nullptr);
  ASSERT_TRUE(pending.emplace("b", entry("b", 3)));
  pending.erase(pending.find("b"));  // now there is one
  EXPECT_FALSE(pending.emplace("a", std::move(again)));
  EXPECT_NE(again.handle, nullptr);
  EXPECT_EQ(pending.find("a")->second.request.params.count, 1);
}

// A spare node must not keep the last entry's handle (and its output) alive:
// the caller's kolo_wait and release decide when a handle goes.
TEST(Pending, EraseLetsGoOfTheHandle) {
  Pending pending;
  TensorEntry e = entry(long_name("h"));
  std::weak_ptr<HandleState> watched = e.handle;
  ASSERT_TRUE(pending.emplace(e.request.name, std::move(e)));
  EXPECT_FALSE(watched.expired());
  pending.erase(pending.begin());
  EXPECT_TRUE(watched.expired());
}

TEST(TensorQueue, FinishedNamesAreReusedAndDuplicatesStillRefused) {
  TensorQueue queue;
  std::vector<TensorEntry> drained;
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(queue.push(entry(long_name(std::to_string(i)))).ok());
  queue.drain(&drained);
  for (const TensorEntry& e : drained) queue.finish(e.request.name);  // four spare nodes
  for (int round = 0; round < 3; ++round) {
    const std::string a = long_name("a"), b = long_name("b" + std::to_string(round));
    ASSERT_TRUE(queue.push(entry(a)).ok());
    ASSERT_TRUE(queue.push(entry(b)).ok());
    Status duplicate = queue.push(entry(a));  // offered a spare node
    EXPECT_EQ(duplicate.code(), Code::kDuplicateName);
    EXPECT_NE(duplicate.message().find(a), std::string::npos) << duplicate.message();
    EXPECT_EQ(queue.in_flight(), 2u);
    drained.clear();
    queue.drain(&drained);
    ASSERT_EQ(drained.size(), 2u);
    EXPECT_EQ(drained[0].request.name, a);
    EXPECT_EQ(drained[1].request.name, b);
    queue.finish(a);
    queue.finish(b);
    EXPECT_EQ(queue.in_flight(), 0u);
  }
}

// Negotiator::cycle overwrites the last cycle's responses in place: a shorter
// list must leave none of the longer one behind, and each response must be the
// one for its own name.
TEST(Negotiator, EachCycleReadyListIsExactlyItsOwn) {
  auto worlds = loopback::create_worlds(1);
  Negotiator negotiator(*worlds[0].control, Config());
  auto request = [](const std::string& name, int64_t count) {
    Request r;
    r.name = name;
    r.params.count = count;
    return r;
  };
  std::vector<Response> ready;  // one vector for every cycle, as the coordinator's
  auto cycle = [&](const std::vector<Request>& requests) {
    for (const Request& r : requests) negotiator.add(r, Clock::now());
    bool stop = false;
    Status s = negotiator.cycle(false, Clock::now(), &ready, &stop);
    EXPECT_TRUE(s.ok()) << s.to_string();
    std::vector<std::string> names;
    for (const Response& r : ready) names.push_back(r.name + ":" + std::to_string(r.params.count));
    return names;
  };
  const std::string a = long_name("a"), b = long_name("b"), c = long_name("c");
  using Names = std::vector<std::string>;
  EXPECT_EQ(cycle({request(a, 1), request(b, 2), request(c, 3)}),
            (Names{a + ":1", b + ":2", c + ":3"}));  // the slow path caches them
  EXPECT_EQ(cycle({request(c, 3), request(a, 1)}), (Names{a + ":1", c + ":3"}));  // bit order
  EXPECT_EQ(cycle({request(b, 2)}), (Names{b + ":2"}));
  EXPECT_EQ(cycle({}), Names{});
  EXPECT_EQ(cycle({request(a, 1), request(b, 2), request(c, 3)}),
            (Names{a + ":1", b + ":2", c + ":3"}));
}

}  // namespace
}  // namespace kolo::core
