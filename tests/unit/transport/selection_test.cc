// The selection table (Note [The selection table] in transport/selection.h):
// its syntax, its edits, and a selector reading KOLO_SELECT's rules against
// the transports' capabilities.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "tests/unit/transport/fake_transport.h"
#include "transport/registry.h"
#include "transport/selection.h"
#include "transport/selector.h"

namespace kolo::transport {
namespace {

using Names = std::vector<std::string>;

Placement one_node() { return Placement{true, true}; }
Placement two_nodes() { return Placement{false, true}; }

TEST(SelectionTable, TheDefaultsParseAndPrintAsTheyRead) {
  const SelectionTable& t = SelectionTable::defaults();
  ASSERT_FALSE(t.rules().empty());
  SelectionTable again;
  ASSERT_TRUE(SelectionTable::parse(t.to_string(), {}, &again).ok()) << t.to_string();
  EXPECT_EQ(again.to_string(), t.to_string());
  // Every default rule names only transports kolo knows.
  EXPECT_TRUE(validate_rules(t.to_string()).ok());
}

TEST(SelectionTable, FirstMatchingRuleWins) {
  SelectionTable t;
  ASSERT_TRUE(SelectionTable::parse("allreduce host 0-4K node : a, b\n"
                                    "allreduce|alltoall * 4K- * : c only  # a comment\n"
                                    "* host * nodes : d",
                                    {}, &t)
                  .ok());
  ASSERT_EQ(t.rules().size(), 3u);
  const Rule* r = t.match(Kind::kAllreduce, DeviceKind::kCpu, 100, one_node());
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->transports, (Names{"a", "b"}));
  r = t.match(Kind::kAllreduce, DeviceKind::kCpu, 4096, one_node());  // 4K is exclusive above
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->transports, (Names{"c"}));
  EXPECT_TRUE(r->only);
  r = t.match(Kind::kAlltoall, DeviceKind::kCuda, 1 << 20, two_nodes());
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->transports, (Names{"c"}));
  r = t.match(Kind::kBroadcast, DeviceKind::kCpu, 10, two_nodes());
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->transports, (Names{"d"}));
  EXPECT_EQ(t.match(Kind::kBroadcast, DeviceKind::kCpu, 10, one_node()), nullptr);
  // '*' is every kind but adasum: Adasum is an op's engine, not a path choice.
  EXPECT_EQ(t.match(Kind::kAdasum, DeviceKind::kCpu, 10, two_nodes()), nullptr);
}

TEST(SelectionTable, BadRulesNameTheRuleAndTheProblem) {
  struct Case {
    const char* text;
    const char* says;
  };
  for (const Case& c : std::vector<Case>{
           {"allreduce host * node shm", "no ':'"},
           {"allreduce host * : shm", "3 fields, not 4"},
           {"allredux host * node : shm", "\"allredux\" is not a kind"},
           {"allreduce gpu * node : shm", "\"gpu\" is not a memory"},
           {"allreduce host 5K-1K node : shm", "it is empty"},
           {"allreduce host 1Q- node : shm", "is not a size range"},
           {"allreduce host * rack : shm", "\"rack\" is not a span"},
           {"allreduce host * node : ", "no transport"},
           {"allreduce host * node : tcp", "\"tcp\" is not a transport"},
       }) {
    const Status s = validate_rules(c.text);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << c.text;
    EXPECT_NE(s.message().find(c.says), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("KOLO_SELECT"), std::string::npos) << s.message();
  }
  EXPECT_TRUE(validate_rules("").ok());
  EXPECT_TRUE(validate_rules(" ; # nothing\n").ok());
}

TEST(SelectionTable, EditsOfTheOlderKnobs) {
  SelectionTable t;
  ASSERT_TRUE(SelectionTable::parse("allreduce host 0-64K * : shm, mpi\n"
                                    "allreduce host 64K- * : shm, ring\n"
                                    "allreduce host * * : mpi only\n"
                                    "allgather host * * : shm",
                                    {}, &t)
                  .ok());
  t.promote("ring", 0, 64 << 10);
  EXPECT_EQ(t.rules()[0].transports, (Names{"ring", "shm", "mpi"}));
  EXPECT_EQ(t.rules()[1].transports, (Names{"shm", "ring"}));
  EXPECT_EQ(t.rules()[2].transports, (Names{"mpi"}));  // "only" rules are the user's word
  t.insert_after("hierarchical", "shm");
  EXPECT_EQ(t.rules()[0].transports, (Names{"ring", "shm", "hierarchical", "mpi"}));
  EXPECT_EQ(t.rules()[1].transports, (Names{"shm", "hierarchical", "ring"}));
  EXPECT_EQ(t.rules()[3].transports, (Names{"shm"}));  // not an allreduce rule
}

// KOLO_SELECT's rules go before kolo's table, and a transport is a candidate
// only where its capabilities cover the call.
TEST(SelectorRules, SelectRulesComeFirstAndCapabilitiesFilter) {
  std::vector<std::unique_ptr<Transport>> owned;
  std::vector<Transport*> offered;
  for (const char* name : {"mpi", "ring", "shm", "adasum", "nccl"}) {
    owned.push_back(std::make_unique<FakeTransport>(name));
    offered.push_back(owned.back().get());
  }
  Topology node{0, 2, 0, 2, 0, 1};
  SelectorOptions options;
  options.rules = "allreduce host 0-1K * : ring, mpi only; alltoall * * * : mpi";
  Selector s(offered, options, node);
  ASSERT_TRUE(s.validate().ok());
  Bucket small;
  small.count = 8;
  small.dtype = DataType::kFloat32;
  EXPECT_EQ(s.auto_order(small), (Names{"ring", "mpi"}));
  small.count = 1024;  // 4 KiB: kolo's own rule
  EXPECT_EQ(s.auto_order(small).front(), "shm");
  CollectiveView v;
  v.alltoall_total = 64;
  std::vector<Transport*> order = s.collective_order(Collective::kAlltoall, v);
  ASSERT_FALSE(order.empty());
  EXPECT_STREQ(order[0]->name(), "mpi");
  for (const Transport* t : order) {
    EXPECT_STRNE(t->name(), "nccl");    // no host memory
    EXPECT_STRNE(t->name(), "adasum");  // moves no alltoall
  }
  v.device.kind = DeviceKind::kCuda;
  order = s.collective_order(Collective::kAlltoall, v);
  ASSERT_EQ(order.size(), 1u);
  EXPECT_STREQ(order[0]->name(), "nccl");

  options.rules = "allreduce host * * : mpi; oops";
  Selector bad(offered, options, node);
  const Status st = bad.validate();
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_NE(st.message().find("\"oops\""), std::string::npos) << st.message();
}

}  // namespace
}  // namespace kolo::transport
