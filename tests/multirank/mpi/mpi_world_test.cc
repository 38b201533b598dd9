// create_world when the caller initialised MPI (as a framework that uses MPI itself
// would): kolo adopts it, works on its own duplicate of the caller's
// communicator, and leaves MPI_Finalize to the caller. Also: worlds on a
// sub-communicator and pretend nodes (test_node_size).
#include <gtest/gtest.h>
#include <mpi.h>

#include <string>
#include <vector>

#include "transport/reduction.h"
#include "transport/world.h"
#include "transports/mpi/mpi_wait.h"
#include "transports/mpi/mpi_world.h"

namespace kolo::mpi {
namespace {

// The caller's side: MPI initialised before kolo and finalised after it.
class CallerOwnsMpi : public ::testing::Environment {
 public:
  void SetUp() override {
    int provided = 0;
    ASSERT_EQ(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided), MPI_SUCCESS);
  }
  void TearDown() override {
    int finalized = 1;
    MPI_Finalized(&finalized);
    EXPECT_FALSE(finalized) << "kolo finalised an MPI it did not initialise";
    MPI_Finalize();
  }
};
::testing::Environment* const kEnvironment =
    ::testing::AddGlobalTestEnvironment(new CallerOwnsMpi);

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
int world_size() {
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

transport::Transport* find(transport::World& world, const std::string& name) {
  for (auto& t : world.transports) {
    if (name == t->name()) return t.get();
  }
  return nullptr;
}

// Sum of `value` over the world's ranks, through the named transport.
int64_t sum_through(transport::World& world, const char* name, int64_t value) {
  transport::Bucket bucket = transport::host_bucket(&value, &value, 1, DataType::kInt64);
  Status status = find(world, name)->allreduce(bucket)->wait();
  EXPECT_TRUE(status.ok()) << status.to_string();
  return value;
}

TEST(MpiWorld, AdoptsTheCallersMpiAndLeavesFinalizeToIt) {
  {
    transport::World world;
    Status status = create_world(WorldOptions{}, &world);
    ASSERT_TRUE(status.ok()) << status.to_string();
    EXPECT_FALSE(static_cast<bool>(world.finalize));
    EXPECT_EQ(world.control->topology().rank, world_rank());
    EXPECT_EQ(world.control->topology().size, world_size());
    ASSERT_NE(world.p2p, nullptr);
    ASSERT_NE(find(world, "mpi"), nullptr);
    ASSERT_NE(find(world, "ring"), nullptr);
    EXPECT_EQ(sum_through(world, "mpi", world_rank() + 1), world_size() * (world_size() + 1) / 2);
  }
  int finalized = 1;
  MPI_Finalized(&finalized);
  EXPECT_FALSE(finalized);
  // The caller's MPI_COMM_WORLD still works after kolo's world is gone.
  int64_t value = 1;
  MPI_Request request;
  ASSERT_EQ(MPI_Iallreduce(MPI_IN_PLACE, &value, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD,
                           &request), MPI_SUCCESS);
  ASSERT_TRUE(wait(&request, nullptr).ok());
  EXPECT_EQ(value, world_size());
}

TEST(MpiWorld, TwoWorldsAtOnceDoNotInterfere) {
  transport::World a, b;
  ASSERT_TRUE(create_world(WorldOptions{}, &a).ok());
  ASSERT_TRUE(create_world(WorldOptions{}, &b).ok());
  // Interleave rings and collectives on the two worlds.
  if (world_rank() == 0) {
    ASSERT_TRUE(a.control->ring(5).ok());
  }
  std::vector<std::string> all;
  ASSERT_TRUE(b.control->allgather(std::to_string(world_rank()), &all).ok());
  EXPECT_EQ(all.size(), static_cast<size_t>(world_size()));
  ASSERT_TRUE(b.control->barrier().ok());
  EXPECT_FALSE(b.control->rung(5)) << "a's doorbell rang in b";
  EXPECT_EQ(sum_through(a, "ring", 2), 2 * world_size());
  EXPECT_EQ(sum_through(b, "mpi", 3), 3 * world_size());
  ASSERT_TRUE(a.control->barrier().ok());
}

TEST(MpiWorld, WorldOnASubCommunicator) {
  // Even and odd world ranks form two groups; each builds a world on its group.
  MPI_Comm group;
  ASSERT_EQ(MPI_Comm_split(MPI_COMM_WORLD, world_rank() % 2, world_rank(), &group), MPI_SUCCESS);
  {
    WorldOptions options;
    options.comm_fortran_handle = MPI_Comm_c2f(group);
    transport::World world;
    Status status = create_world(options, &world);
    ASSERT_TRUE(status.ok()) << status.to_string();
    const int group_size = (world_size() + 1 - world_rank() % 2) / 2;
    EXPECT_EQ(world.control->topology().size, group_size);
    EXPECT_EQ(world.control->topology().rank, world_rank() / 2);
    // Sum of the world ranks in my group: r, r+2, r+4, ... for r = world_rank % 2.
    int64_t want = 0;
    for (int r = world_rank() % 2; r < world_size(); r += 2) want += r;
    EXPECT_EQ(sum_through(world, "mpi", world_rank()), want);
    EXPECT_EQ(sum_through(world, "ring", world_rank()), want);
  }
  MPI_Comm_free(&group);
}

TEST(MpiWorld, PretendNodesOfTwoRanks) {
  WorldOptions options;
  options.test_node_size = 2;
  transport::World world;
  ASSERT_TRUE(create_world(options, &world).ok());
  const transport::Topology& t = world.control->topology();
  const int r = world_rank(), n = world_size();
  EXPECT_EQ(t.local_rank, r % 2);
  EXPECT_EQ(t.local_size, std::min(2, n - r / 2 * 2));  // the last node may have one rank
  EXPECT_EQ(t.cross_rank, r / 2);
  EXPECT_EQ(t.cross_size, r % 2 == 0 ? (n + 1) / 2 : n / 2);
}

TEST(MpiWorld, NegativeNodeSizeIsAnInvalidArgument) {
  WorldOptions options;
  options.test_node_size = -1;
  transport::World world;
  EXPECT_EQ(create_world(options, &world).code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace kolo::mpi
