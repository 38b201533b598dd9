// The "hierarchical" transport across real nodes: run in the pretend cluster
// (tools/pretend_cluster.sh, label multihost), where each host is a network
// namespace with its own hostname, so MPI and kolo see the hosts as nodes. Checks
// every dtype and op exactly at counts 0, 1, n-1, n+1, 1000, 2^20+3, in place and
// out of place, fused buckets and repeated calls, on nodes of equal size (2 hosts
// x 1 and x 2 ranks); on unequal nodes (2 + 1 ranks) the world must not offer it.
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

// The world's hierarchical transport, or nullptr where it offers none.
transport::Transport* hierarchical() { return find_transport("hierarchical"); }

// Whether the world's nodes are of equal size: every rank's local size agrees.
bool equal_nodes() {
  const transport::Topology& topo = test_world().control->topology();
  std::vector<transport::Bytes> all;
  Status s = test_world().control->allgather(std::to_string(topo.local_size), &all);
  EXPECT_TRUE(s.ok()) << s.to_string();
  for (const auto& b : all) {
    if (b != all.front()) return false;
  }
  return true;
}

TEST(Hierarchical, OfferedExactlyOnSeveralNodesOfEqualSize) {
  const transport::Topology& topo = test_world().control->topology();
  EXPECT_LT(topo.local_size, topo.size) << "one node: run this test in the pretend cluster";
  EXPECT_EQ(hierarchical() != nullptr, equal_nodes());
  EXPECT_EQ(find_transport("shm"), nullptr) << "shm is offered on one node only";
}

// Every test below runs the transport where the world offers it and does nothing
// elsewhere, the same on every rank (the offer is agreed at init).
template <typename T>
void check_every_count() {
  SCOPED_TRACE(dtype_name(Dtype<T>::kValue));
  transport::Transport* t = hierarchical();
  if (t == nullptr) return;
  const transport::Topology& topo = test_world().control->topology();
  SCOPED_TRACE("local size " + std::to_string(topo.local_size) + ", nodes " +
               std::to_string(topo.cross_size));
  check_counts<T>(*t, topo.rank, topo.size);
}

TEST(Hierarchical, EveryDtypeOpAndCount) {
  check_every_count<uint8_t>();
  check_every_count<int8_t>();
  check_every_count<uint16_t>();
  check_every_count<int16_t>();
  check_every_count<int32_t>();
  check_every_count<int64_t>();
  check_every_count<Float16>();
  check_every_count<Bfloat16>();
  check_every_count<float>();
  check_every_count<double>();
  check_every_count<Bool>();
}

// A fused bucket: unpacked where nodes have several ranks (shards that span
// tensors go through the cross ring as one piece each), packed where they have one.
TEST(Hierarchical, FusedBucketUnpacked) {
  transport::Transport* t = hierarchical();
  if (t == nullptr) return;
  const transport::Topology& topo = test_world().control->topology();
  SCOPED_TRACE("local size " + std::to_string(topo.local_size));
  for (ReduceOp op : kOps)
    check_unpacked<float>(*t, topo.rank, topo.size, {0, 1, 63, 1000, 5, 300001, 17}, op);
  check_unpacked<int64_t>(*t, topo.rank, topo.size, {131072, 3, 0, 70001}, ReduceOp::kSum);
}

// Repeated calls on the two-level path (slot reuse, ring tags in step).
// A prescale applied by the node's engine as it reads the tensors, the output
// factor after the inter-node step: each once.
TEST(Hierarchical, PrescaleAndOutputFactor) {
  transport::Transport* t = hierarchical();
  if (t == nullptr) return;
  const transport::Topology& topo = test_world().control->topology();
  for (ReduceOp op : kOps) {
    check_scaled<float>(*t, topo.rank, topo.size, {0, 1, 63, 1000, 300001, 17}, op, 0.5, 2.0);
    check_scaled<int32_t>(*t, topo.rank, topo.size, {70001, 3}, op, 0.5, 2.0);
  }
  check_scaled<Float16>(*t, topo.rank, topo.size, {131072, 3}, ReduceOp::kSum, 2.0, 0.5);
}

TEST(Hierarchical, RepeatedCalls) {
  transport::Transport* t = hierarchical();
  if (t == nullptr) return;
  const int rank = test_world().control->topology().rank;
  const int size = test_world().control->topology().size;
  for (int i = 0; i < 100; ++i) {
    std::vector<int64_t> v(static_cast<size_t>(1 + i * 37 % 301), rank + i);
    Status s =
        t->allreduce(bucket_of(v.data(), v.data(), static_cast<int64_t>(v.size()), ReduceOp::kSum))
            ->wait();
    EXPECT_TRUE(s.ok()) << s.to_string();
    const int64_t want = int64_t{size} * (size - 1) / 2 + int64_t{size} * i;
    EXPECT_EQ(v.front(), want);
    EXPECT_EQ(v.back(), want);
  }
}

}  // namespace
}  // namespace kolo::mpi
