// Nodes and the auto order across real nodes: run in the pretend cluster
// (tools/pretend_cluster.sh, label multihost), where each host is a network
// namespace with its own hostname. kolo's nodes must be exactly the hosts (MPI's
// shared-memory split follows Hydra's hosts), and with KOLO_TRANSPORT=auto every
// bucket must go where Note [Auto order] (src/transport/selection.cc) says: "mpi"
// under 64 KiB, "hierarchical" from 64 KiB on equal nodes and "ring" on unequal
// ones; each chosen transport's result is checked exactly. Built with
// KOLO_TEST_SOCKET_WORLD it checks the socket world the same way: its nodes are
// the hosts its launch put ranks on, and it has no "mpi", so the order is the
// same with "mpi" left out (the ring serves where MPI's collectives would).
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "tests/multirank/mpi/allreduce_values.h"
#include "tests/multirank/mpi/mpi_test_world.h"
#include "transport/registry.h"

namespace kolo::mpi {
namespace {

using namespace testing;  // NOLINT: the test helpers

std::string host_name() {
  char host[256] = {};
  EXPECT_EQ(gethostname(host, sizeof host - 1), 0);
  return host;
}

// Every rank's host name, in rank order.
std::vector<std::string> every_host() {
  std::vector<transport::Bytes> all;
  Status s = test_world().control->allgather(host_name(), &all);
  EXPECT_TRUE(s.ok()) << s.to_string();
  return all;
}

TEST(Topology, NodesAreTheHosts) {
  const transport::Topology& topo = test_world().control->topology();
  const std::vector<std::string> hosts = every_host();
  ASSERT_EQ(hosts.size(), static_cast<size_t>(topo.size));
  const std::string mine = hosts[topo.rank];
  const std::set<std::string> distinct(hosts.begin(), hosts.end());
  EXPECT_GE(distinct.size(), 2u) << "one host: run this test in the pretend cluster";
  EXPECT_EQ(topo.local_size, std::count(hosts.begin(), hosts.end(), mine));
  EXPECT_EQ(topo.local_rank, std::count(hosts.begin(), hosts.begin() + topo.rank, mine));
  // cross_size counts the nodes where every node has a rank of this local rank.
  int nodes_with_my_local_rank = 0;
  for (const std::string& h : distinct) {
    nodes_with_my_local_rank += std::count(hosts.begin(), hosts.end(), h) > topo.local_rank;
  }
  EXPECT_EQ(topo.cross_size, nodes_with_my_local_rank);
  // The node's index: the hosts numbered in the order of their first ranks (the
  // node layer names its segment by it).
  std::vector<std::string> order;
  for (const std::string& h : hosts)
    if (std::find(order.begin(), order.end(), h) == order.end()) order.push_back(h);
  EXPECT_EQ(topo.node, std::find(order.begin(), order.end(), mine) - order.begin());
  // The layout, for the test's registration to match (EXPECT in CMakeLists.txt).
  if (topo.rank == 0) {
    std::string sizes;
    for (const std::string& h : order) sizes += " " + std::to_string(std::count(hosts.begin(), hosts.end(), h));
    std::printf("topology_test: ranks per node%s\n", sizes.c_str());
  }
#ifndef KOLO_TEST_SOCKET_WORLD  // (no MPI in a socket-world job)
  char name[MPI_MAX_PROCESSOR_NAME] = {};
  int length = 0;
  ASSERT_EQ(MPI_Get_processor_name(name, &length), MPI_SUCCESS);
  EXPECT_EQ(std::string(name, static_cast<size_t>(length)), mine);
#endif
}

bool equal_nodes() {
  std::vector<transport::Bytes> all;
  const transport::Topology& topo = test_world().control->topology();
  Status s = test_world().control->allgather(std::to_string(topo.local_size), &all);
  EXPECT_TRUE(s.ok()) << s.to_string();
  return std::all_of(all.begin(), all.end(), [&](const auto& b) { return b == all.front(); });
}

// The auto order's first entries, for a CPU bucket of `bytes` on several nodes.
std::vector<std::string> expected_order(size_t bytes, bool equal) {
  const bool small = bytes < (size_t{64} << 10);
  std::vector<std::string> order;
  if (equal) {
    order = small ? std::vector<std::string>{"mpi", "hierarchical", "ring"}
                  : std::vector<std::string>{"hierarchical", "ring", "mpi"};
  } else {
    order = small ? std::vector<std::string>{"mpi", "ring"} : std::vector<std::string>{"ring", "mpi"};
  }
#ifdef KOLO_TEST_SOCKET_WORLD
  order.erase(std::remove(order.begin(), order.end(), "mpi"), order.end());
#endif
  return order;
}

TEST(Topology, AutoOrderAsItsNoteSays) {
  const transport::Topology& topo = test_world().control->topology();
  std::vector<transport::Transport*> offered;
  for (auto& t : test_world().transports) offered.push_back(t.get());
  transport::Selector selector(offered, "auto", topo);
  ASSERT_TRUE(selector.validate().ok());
  const bool equal = equal_nodes();
  // Counts of float32: 8 B, just under 64 KiB, exactly 64 KiB, 4 MiB + 4 B.
  for (int64_t count : {int64_t{2}, int64_t{16383}, int64_t{16384}, int64_t{(1 << 20) + 1}}) {
    const size_t bytes = static_cast<size_t>(count) * sizeof(float);
    SCOPED_TRACE(std::to_string(bytes) + " bytes, " + (equal ? "equal" : "unequal") + " nodes");
    std::vector<float> in(static_cast<size_t>(count)), out(static_cast<size_t>(count));
    const transport::Bucket bucket = bucket_of(in.data(), out.data(), count, ReduceOp::kSum);
    const std::vector<std::string> want = expected_order(bytes, equal);
    std::vector<std::string> order = selector.auto_order(bucket);
    ASSERT_GE(order.size(), want.size());
    order.resize(want.size());
    EXPECT_EQ(order, want);
    transport::Transport* chosen = nullptr;
    ASSERT_TRUE(selector.select(bucket, &chosen).ok());
    EXPECT_EQ(std::string(chosen->name()), want.front());
    for (ReduceOp op : kOps) check_allreduce<float>(*chosen, topo.rank, topo.size, count, op, false);
  }
}

}  // namespace
}  // namespace kolo::mpi
