// The "hierarchical" transport under mpiexec, on pretend nodes: worlds created
// with test_node_size (KOLO_TEST_NODE_SIZE, test-only) split this machine's ranks
// into nodes of 1 or 2 consecutive ranks. Checks when the world offers the
// transport (several nodes of equal size), and every dtype and op exactly at
// counts 0, 1, n-1, n+1, 1000, 2^20+3, in place and out of place.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tests/multirank/mpi/allreduce_values.h"
#include "tests/multirank/mpi/mpi_test_world.h"
#include "transports/mpi/mpi_world.h"

namespace kolo::mpi {
namespace {

using namespace testing;  // NOLINT: the test helpers

constexpr int kNodeSizes[] = {1, 2};

// One world per pretend node size, created once for the suite (collectively) and
// destroyed before the global world finalises MPI.
class HierarchicalTest : public ::testing::Test {
 public:
  static void SetUpTestSuite() {
    for (int node_size : kNodeSizes) {
      auto world = std::make_unique<transport::World>();
      WorldOptions options;
      options.test_node_size = node_size;
      Status status = create_world(options, world.get());
      ASSERT_TRUE(status.ok()) << status.to_string();
      worlds().push_back(std::move(world));
    }
  }
  static void TearDownTestSuite() { worlds().clear(); }

  static std::vector<std::unique_ptr<transport::World>>& worlds() {
    static std::vector<std::unique_ptr<transport::World>> w;
    return w;
  }

  static transport::Transport* hierarchical(const transport::World& world) {
    for (auto& t : world.transports) {
      if (std::string(t->name()) == "hierarchical") return t.get();
    }
    return nullptr;
  }
};

TEST_F(HierarchicalTest, OfferedForSeveralNodesOfEqualSize) {
  ASSERT_EQ(worlds().size(), std::size(kNodeSizes));
  for (size_t i = 0; i < worlds().size(); ++i) {
    const transport::Topology& topo = worlds()[i]->control->topology();
    const int node_size = kNodeSizes[i];
    SCOPED_TRACE("node size " + std::to_string(node_size));
    const bool want = topo.size % node_size == 0 && topo.size / node_size > 1;
    EXPECT_EQ(hierarchical(*worlds()[i]) != nullptr, want);
    EXPECT_EQ(topo.local_size, std::min(node_size, topo.size - topo.rank / node_size * node_size));
  }
}

template <typename T>
void check_every_world() {
  SCOPED_TRACE(dtype_name(Dtype<T>::kValue));
  for (auto& world : HierarchicalTest::worlds()) {
    transport::Transport* t = HierarchicalTest::hierarchical(*world);
    if (t == nullptr) continue;  // e.g. 3 ranks in nodes of 2: unequal nodes
    const transport::Topology& topo = world->control->topology();
    SCOPED_TRACE("local size " + std::to_string(topo.local_size) + ", nodes " +
                 std::to_string(topo.cross_size));
    check_counts<T>(*t, topo.rank, topo.size);
  }
}

// One test over every dtype (not a typed suite: the worlds are made once).
TEST_F(HierarchicalTest, EveryDtypeOpAndCount) {
  ASSERT_NE(hierarchical(*worlds()[0]), nullptr);  // node size 1: always several nodes
  check_every_world<uint8_t>();
  check_every_world<int8_t>();
  check_every_world<uint16_t>();
  check_every_world<int16_t>();
  check_every_world<int32_t>();
  check_every_world<int64_t>();
  check_every_world<Float16>();
  check_every_world<Bfloat16>();
  check_every_world<float>();
  check_every_world<double>();
  check_every_world<Bool>();
}

// A fused bucket: unpacked where nodes have several ranks (shards that span
// tensors go through the cross ring as one piece each), packed where they have one.
TEST_F(HierarchicalTest, FusedBucketUnpacked) {
  for (auto& world : worlds()) {
    transport::Transport* t = hierarchical(*world);
    if (t == nullptr) continue;
    const transport::Topology& topo = world->control->topology();
    SCOPED_TRACE("local size " + std::to_string(topo.local_size));
    for (ReduceOp op : kOps)
      check_unpacked<float>(*t, topo.rank, topo.size, {0, 1, 63, 1000, 5, 300001, 17}, op);
    check_unpacked<int64_t>(*t, topo.rank, topo.size, {131072, 3, 0, 70001}, ReduceOp::kSum);
  }
}

// Repeated calls on the two-level path (slot reuse, ring tags in step).
TEST_F(HierarchicalTest, RepeatedCalls) {
  for (auto& world : worlds()) {
    transport::Transport* t = hierarchical(*world);
    if (t == nullptr) continue;
    const int rank = world->control->topology().rank;
    const int size = world->control->topology().size;
    for (int i = 0; i < 100; ++i) {
      std::vector<int64_t> v(static_cast<size_t>(1 + i * 37 % 301), rank + i);
      Status s = t->allreduce(bucket_of(v.data(), v.data(), static_cast<int64_t>(v.size()),
                                        ReduceOp::kSum))
                     ->wait();
      EXPECT_TRUE(s.ok()) << s.to_string();
      const int64_t want = int64_t{size} * (size - 1) / 2 + int64_t{size} * i;
      EXPECT_EQ(v.front(), want);
      EXPECT_EQ(v.back(), want);
    }
  }
}

}  // namespace
}  // namespace kolo::mpi
