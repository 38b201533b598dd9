// The "hierarchical" transport's allgather, broadcast, alltoall and reducescatter
// across real nodes: run in the pretend cluster (tools/pretend_cluster.sh, label
// multihost) at 2 hosts x 1 and x 2 ranks, where the world offers it, and at 2 + 1
// ranks, where it does not and the auto choice must be MPI's. Every dtype, counts
// that differ per rank with zeros, every broadcast root, every reducescatter op
// with shards not divisible by the world size, in place and not, calls larger than
// the shm engine's slot; exact (collective_checks.h). Ranks whose calls disagree
// get the same Mismatch on every rank, and the transport stays usable.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "tests/multirank/mpi/allreduce_values.h"
#include "tests/multirank/mpi/collective_checks.h"
#include "tests/multirank/mpi/mpi_test_world.h"
#include "transport/registry.h"

namespace kolo::mpi {
namespace {

using namespace testing;  // NOLINT: the test helpers

// The transport under test: "hierarchical" where the world offers it (equal
// nodes), else the world's native one (so that the same checks hold its answers
// to the same calls: MPI's, or the ring's on the socket world).
transport::Transport& under_test() {
  transport::Transport* t = find_transport("hierarchical");
  return t != nullptr ? *t : *find_transport(kNativeTransport);
}

bool equal_nodes() { return find_transport("hierarchical") != nullptr; }

template <typename T>
class HierarchicalCollectivesTest : public ::testing::Test {};

using Dtypes = ::testing::Types<uint8_t, int8_t, uint16_t, int16_t, int32_t, int64_t, Float16,
                                Bfloat16, float, double, Bool>;
TYPED_TEST_SUITE(HierarchicalCollectivesTest, Dtypes);

TYPED_TEST(HierarchicalCollectivesTest, AllgatherConcatenatesInRankOrder) {
  for (int pattern = 0; pattern < 4; ++pattern) {
    for (bool in_place : {false, true}) {
      EXPECT_EQ(check_allgather<TypeParam>(under_test(), pattern, in_place), 0)
          << "pattern " << pattern << (in_place ? " in place" : "");
    }
  }
}

TYPED_TEST(HierarchicalCollectivesTest, BroadcastFromEveryRootInPlaceAndNot) {
  // 0, fewer than a node's ranks, uneven shards, several shm slots.
  for (int root = 0; root < size(); ++root) {
    for (int64_t count : {0, 1, 7, 1000, 300001}) {
      for (bool in_place : {true, false}) {
        EXPECT_EQ(check_broadcast<TypeParam>(under_test(), root, count, in_place), 0)
            << "root " << root << " count " << count << (in_place ? " in place" : "");
      }
    }
  }
}

TYPED_TEST(HierarchicalCollectivesTest, AlltoallDeliversEveryPairsBlock) {
  for (int pattern = 0; pattern < 3; ++pattern) {
    auto counts = [pattern](int s, int d) { return pair_count(pattern, s, d); };
    EXPECT_EQ(check_alltoall<TypeParam>(under_test(), counts), 0) << "pattern " << pattern;
  }
  // Larger than a slot between some pairs, nothing between others.
  auto large = [](int s, int d) -> int64_t { return (s + d) % 2 == 0 ? 0 : 70001 + s; };
  EXPECT_EQ(check_alltoall<TypeParam>(under_test(), large), 0);
}

TYPED_TEST(HierarchicalCollectivesTest, ReducescatterEveryOpUnevenShards) {
  const int64_t n = size();
  for (ReduceOp op : kOps) {
    for (int64_t total : {int64_t{0}, int64_t{1}, n - 1, n + 1, int64_t{1001}, int64_t{300001}}) {
      for (bool in_place : {false, true}) {
        EXPECT_EQ(check_reducescatter<TypeParam>(under_test(), op, total, in_place), 0)
            << op_name(op) << " total " << total << (in_place ? " in place" : "");
      }
    }
  }
}

// The factors, applied once: prescale 2 on the input, postscale 0.5 on the output.
TEST(HierarchicalCollectives, ReducescatterAppliesTheFactors) {
  const int64_t total = 1001;
  std::vector<float> in(total), out(shards(total, size())[rank()], -1);
  for (int64_t i = 0; i < total; ++i) in[i] = static_cast<float>(reduce_input<float>(rank(), i, ReduceOp::kSum));
  CollectiveView v = view_of<float>(in.data(), out.data());
  v.recv_counts = shards(total, size());
  v.reduction.prescale = 2.0;
  v.reduction.postscale = 0.25;
  EXPECT_TRUE(run(under_test(), Collective::kReducescatter, v).ok());
  int64_t first = 0, wrong = 0;
  for (int r = 0; r < rank(); ++r) first += v.recv_counts[r];
  for (size_t k = 0; k < out.size(); ++k)
    wrong += out[k] != static_cast<float>(reduced<float>(first + k, ReduceOp::kSum) * 0.5);
  EXPECT_EQ(wrong, 0);
}

// Where the auto choice sends the other collectives: "hierarchical" on equal nodes
// of several ranks from Selector::hierarchical_min_bytes(op) up (MPI below), "mpi"
// on unequal nodes and nodes of one rank; KOLO_TRANSPORT=mpi forces MPI's everywhere.
TEST(HierarchicalCollectives, AutoChoiceAsTheNoteSays) {
#ifdef KOLO_TEST_SOCKET_WORLD
  GTEST_SKIP() << "the MPI world's choice between hierarchical and MPI's collectives";
#endif
  std::vector<transport::Transport*> offered;
  for (auto& t : test_world().transports) offered.push_back(t.get());
  const transport::Topology& topo = test_world().control->topology();
  transport::Selector automatic(offered, "auto", topo), forced(offered, "mpi", topo);
  for (int64_t count : {int64_t{16}, int64_t{1} << 18}) {  // 64 B, 1 MiB of float32
    std::vector<float> buffer(static_cast<size_t>(count) * size());
    CollectiveView v = view_of<float>(buffer.data(), buffer.data());
    v.count = count;
    v.recv_counts.assign(size(), count);
    v.send_counts.assign(size(), count / size());
    v.alltoall_total = count / size() * size() * size();
    const bool large = count >= (int64_t{1} << 18) && topo.local_size > 1;
    for (Collective op : {Collective::kAllgather, Collective::kBroadcast,
                            Collective::kAlltoall, Collective::kReducescatter}) {
      SCOPED_TRACE(std::string(collective_name(op)) + " of " + std::to_string(count));
      if (op == Collective::kAllgather) v.recv_counts.assign(size(), count / size());
      if (op == Collective::kAlltoall) v.recv_counts.assign(size(), count / size());
      if (op == Collective::kReducescatter) v.recv_counts = shards(count, size());
      transport::Transport* chosen = nullptr;
      ASSERT_TRUE(automatic.select_collective(op, v, &chosen).ok());
      EXPECT_EQ(std::string(chosen->name()), equal_nodes() && large ? "hierarchical" : "mpi");
      ASSERT_TRUE(forced.select_collective(op, v, &chosen).ok());
      EXPECT_EQ(std::string(chosen->name()), "mpi");
    }
  }
  // An alltoall whose world total is not known stays on MPI.
  std::vector<float> buffer(size_t{1} << 20);
  CollectiveView v = view_of<float>(buffer.data(), buffer.data() + (size_t{1} << 19));
  v.send_counts.assign(size(), (1 << 19) / size());
  v.recv_counts = v.send_counts;
  transport::Transport* chosen = nullptr;
  ASSERT_TRUE(automatic.select_collective(Collective::kAlltoall, v, &chosen).ok());
  EXPECT_EQ(std::string(chosen->name()), "mpi");
}

// Every rank's status of one call, gathered: all the same, and a Mismatch.
void expect_same_mismatch_everywhere(const Status& s) {
  EXPECT_EQ(s.code(), Code::kMismatch) << s.to_string();
  std::vector<transport::Bytes> all;
  ASSERT_TRUE(test_world().control->allgather(s.message(), &all).ok());
  for (const auto& m : all) EXPECT_EQ(m, all.front());
}

// Each case disagrees across nodes (the last rank is on another node than rank 0).
TEST(HierarchicalCollectives, DisagreementGivesEveryRankTheSameMismatch) {
  if (!equal_nodes()) return;
  transport::Transport& t = under_test();
  const bool last = rank() == size() - 1;
  std::vector<int32_t> buffer(64 * size(), 1);
  CollectiveView v = view_of<int32_t>(buffer.data(), buffer.data());
  v.count = 8;
  v.root = last ? 1 : 0;  // roots differ
  Status s = t.collective(Collective::kBroadcast, v)->wait();
  expect_same_mismatch_everywhere(s);
  EXPECT_NE(s.message().find("root"), std::string::npos) << s.message();
  v.root = 0;  // collectives differ
  s = t.collective(last ? Collective::kBroadcast : Collective::kAllgather,
                   [&] { CollectiveView g = v; g.recv_counts.assign(size(), 1); return g; }())
          ->wait();
  expect_same_mismatch_everywhere(s);
  EXPECT_NE(s.message().find("collective"), std::string::npos) << s.message();
  CollectiveView a = view_of<int32_t>(buffer.data(), buffer.data() + 32 * size());
  a.send_counts.assign(size(), 2);
  a.recv_counts.assign(size(), 2);
  if (rank() == 0) a.send_counts[size() - 1] = 3;  // the last rank expects 2
  s = t.collective(Collective::kAlltoall, a)->wait();
  expect_same_mismatch_everywhere(s);
  EXPECT_NE(s.message().find("send counts"), std::string::npos) << s.message();
  // The transport is still in step.
  EXPECT_EQ(check_broadcast<int32_t>(t, size() - 1, 1000, false), 0);
}

}  // namespace
}  // namespace kolo::mpi
