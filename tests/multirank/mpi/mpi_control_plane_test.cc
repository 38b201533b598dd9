// The MPI control plane under mpiexec: blob collectives with per-rank sizes
// (including empty ones), bitwise AND (through shared memory and through MPI),
// barrier, and the doorbell.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "tests/multirank/mpi/mpi_test_world.h"
#include "transports/mpi/mpi_control_plane.h"
#include "transports/shm/node_and.h"

namespace kolo::mpi {
namespace {

using shm::NodeAnd;
using testing::eventually;
using testing::test_world;
using transport::Bytes;

transport::ControlPlane& control() { return *test_world().control; }
int rank() { return control().topology().rank; }
int size() { return control().topology().size; }

// Rank r's blob: `length_per_rank * r` bytes (rank 0's is empty), every byte value
// 0..255 appearing, so that a misplaced or truncated blob shows.
Bytes blob_of(int r, size_t length_per_rank) {
  Bytes blob(length_per_rank * r, '\0');
  for (size_t i = 0; i < blob.size(); ++i) blob[i] = static_cast<char>((i * 7 + r * 31) & 0xff);
  return blob;
}

TEST(MpiControlPlane, TopologyIsOneNodeOfAllRanks) {
  int world_rank = 0, world_size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  const transport::Topology& t = control().topology();
  EXPECT_EQ(t.rank, world_rank);
  EXPECT_EQ(t.size, world_size);
  // mpiexec on one machine: every rank shares one node.
  EXPECT_EQ(t.local_rank, world_rank);
  EXPECT_EQ(t.local_size, world_size);
  EXPECT_EQ(t.cross_rank, 0);
  EXPECT_EQ(t.cross_size, 1);
}

TEST(MpiControlPlane, AllgatherBlobsOfDifferentSizes) {
  for (size_t length : {size_t{0}, size_t{1}, size_t{3}, size_t{40000}}) {
    SCOPED_TRACE("bytes per rank " + std::to_string(length));
    std::vector<Bytes> all = {"stale"};
    ASSERT_TRUE(control().allgather(blob_of(rank(), length), &all).ok());
    ASSERT_EQ(all.size(), static_cast<size_t>(size()));
    for (int r = 0; r < size(); ++r) EXPECT_EQ(all[r], blob_of(r, length)) << "rank " << r;
  }
}

TEST(MpiControlPlane, GatherToEveryRoot) {
  for (int root = 0; root < size(); ++root) {
    std::vector<Bytes> all = {"stale"};
    ASSERT_TRUE(control().gather(blob_of(rank(), 5), &all, root).ok());
    if (rank() == root) {
      ASSERT_EQ(all.size(), static_cast<size_t>(size()));
      for (int r = 0; r < size(); ++r) EXPECT_EQ(all[r], blob_of(r, 5)) << "rank " << r;
    } else {
      EXPECT_TRUE(all.empty()) << "root " << root;
    }
  }
}

TEST(MpiControlPlane, BroadcastFromEveryRootReplacesBlob) {
  for (int root = 0; root < size(); ++root) {
    // Root 0 broadcasts an empty blob over the others' non-empty ones.
    Bytes blob = rank() == root ? blob_of(root, 11) : Bytes(17, 'x');
    ASSERT_TRUE(control().broadcast(&blob, root).ok());
    EXPECT_EQ(blob, blob_of(root, 11)) << "root " << root;
  }
}

TEST(MpiControlPlane, BadRootIsAnInvalidArgumentOnEveryRank) {
  std::vector<Bytes> all;
  Bytes blob;
  EXPECT_EQ(control().gather("x", &all, size()).code(), Code::kInvalidArgument);
  EXPECT_EQ(control().broadcast(&blob, -1).code(), Code::kInvalidArgument);
}

TEST(MpiControlPlane, BitwiseAnd) {
  // Word i on rank r has every bit set except bit (i + r) % 64, so the AND clears
  // the bits (i + 0 .. i + size-1) % 64 of word i.
  for (size_t words : {size_t{0}, size_t{1}, size_t{70}}) {
    std::vector<uint64_t> bits(words);
    for (size_t i = 0; i < words; ++i) bits[i] = ~(uint64_t{1} << ((i + rank()) % 64));
    ASSERT_TRUE(control().bitwise_and(&bits).ok());
    ASSERT_EQ(bits.size(), words);
    for (size_t i = 0; i < words; ++i) {
      uint64_t expected = ~uint64_t{0};
      for (int r = 0; r < size(); ++r) expected &= ~(uint64_t{1} << ((i + r) % 64));
      EXPECT_EQ(bits[i], expected) << "word " << i;
    }
  }
}

// Every rank of these tests is on one node, so bitwise_and runs through the
// node's shared memory (shm::NodeAnd) up to NodeAnd::kMaxWords words and through MPI
// above. Many calls in a row reuse the two slots; lengths on both sides of the
// limit and blob collectives in between interleave the two paths; each call's
// pattern depends on the call, so an answer read from a stale slot shows.
TEST(MpiControlPlane, BitwiseAndManyCallsAcrossBothPaths) {
  const size_t lengths[] = {0, 1, 49, NodeAnd::kMaxWords, NodeAnd::kMaxWords + 1, 2000};
  for (int call = 0; call < 300; ++call) {
    const size_t words = lengths[call % 6];
    // Rank r clears bit (call + i + 3r) % 64 of word i.
    auto cleared = [call](size_t i, int r) {
      return uint64_t{1} << ((static_cast<size_t>(call) + i + 3 * static_cast<size_t>(r)) % 64);
    };
    std::vector<uint64_t> bits(words);
    for (size_t i = 0; i < words; ++i) bits[i] = ~cleared(i, rank());
    ASSERT_TRUE(control().bitwise_and(&bits).ok()) << "call " << call;
    ASSERT_EQ(bits.size(), words);
    size_t wrong = 0;
    for (size_t i = 0; i < words; ++i) {
      uint64_t expected = ~uint64_t{0};
      for (int r = 0; r < size(); ++r) expected &= ~cleared(i, r);
      wrong += bits[i] != expected;
    }
    EXPECT_EQ(wrong, 0u) << "call " << call << ", " << words << " words";
    if (call % 7 == 0) {
      std::vector<Bytes> all;
      ASSERT_TRUE(control().allgather(blob_of(rank(), 3), &all).ok());
      ASSERT_EQ(all.size(), static_cast<size_t>(size()));
    }
  }
}

// Through the control plane: a vector too long for the node's board goes
// through MPI, and then nothing is unanimous (the carried bytes were not sent).
TEST(MpiControlPlane, OnlyTheNodesAndCarries) {
  EXPECT_EQ(control().carry_capacity(NodeAnd::kMaxWords), NodeAnd::kCarryBytes);
  EXPECT_EQ(control().carry_capacity(NodeAnd::kMaxWords + 1), 0u);
  std::vector<uint64_t> bits(4, ~uint64_t{0});
  ASSERT_TRUE(control().bitwise_and(&bits).ok());
  EXPECT_TRUE(control().unanimous());
  bits.assign(NodeAnd::kMaxWords + 1, ~uint64_t{0});
  ASSERT_TRUE(control().bitwise_and(&bits).ok());
  EXPECT_FALSE(control().unanimous());
}

// Every rank reads the (machine-wide) monotonic clock as it enters and as it
// leaves; nobody may leave before the last one entered. Rank 0 comes late, so
// a barrier that did not wait would show. (Elapsed times per rank are no check:
// under load the ranks start the test far apart.)
int64_t monotonic_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

TEST(MpiControlPlane, BarrierWaitsForTheLastRank) {
  if (rank() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(30));
  const int64_t entered = monotonic_ns();
  ASSERT_TRUE(control().barrier().ok());
  const int64_t left = monotonic_ns();
  std::vector<Bytes> all;
  const Bytes mine(reinterpret_cast<const char*>(&entered), sizeof entered);
  ASSERT_TRUE(control().allgather(mine, &all).ok());
  int64_t last_entry = 0;
  for (const Bytes& b : all) {
    int64_t t = 0;
    ASSERT_EQ(b.size(), sizeof t);
    std::memcpy(&t, b.data(), sizeof t);
    last_entry = std::max(last_entry, t);
  }
  EXPECT_GE(left, last_entry);
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(control().barrier().ok());
}

// The doorbell tests use cycle numbers that grow from test to test: what a rank
// has heard stays heard for the rest of the process.
TEST(MpiControlPlane, DoorbellFromOneRankReachesEveryOther) {
  // Nobody rings 10 before this barrier.
  EXPECT_FALSE(control().rung(10));
  ASSERT_TRUE(control().barrier().ok());
  if (rank() == 0) {
    ASSERT_TRUE(control().ring(10).ok());
  }
  if (rank() != 0) {
    EXPECT_TRUE(eventually([] { return control().rung(10); }));
    EXPECT_TRUE(control().rung(3)) << "rung(c) is true for any c up to the highest";
    EXPECT_FALSE(control().rung(11));
  } else {
    EXPECT_FALSE(control().rung(10)) << "a rank does not hear its own ring";
  }
  ASSERT_TRUE(control().barrier().ok());
}

TEST(MpiControlPlane, DoorbellFromEveryRankKeepsTheHighest) {
  const uint64_t base = 1000;
  ASSERT_TRUE(control().ring(base + rank()).ok());
  // Highest ring this rank hears: the highest other rank's.
  const uint64_t highest = base + (rank() == size() - 1 ? size() - 2 : size() - 1);
  EXPECT_TRUE(eventually([&] { return control().rung(highest); }));
  EXPECT_FALSE(control().rung(highest + 1));
  ASSERT_TRUE(control().barrier().ok());
}

TEST(MpiControlPlane, ManyRingsAreAllReceivedAndReaped) {
  const uint64_t base = 2000;
  const int rings = 500;
  if (rank() == 0) {
    for (int i = 0; i < rings; ++i) ASSERT_TRUE(control().ring(base + i).ok());
  } else {
    EXPECT_TRUE(eventually([&] { return control().rung(base + rings - 1); }));
    EXPECT_FALSE(control().rung(base + rings));
  }
  ASSERT_TRUE(control().barrier().ok());
  // The collectives still work after the doorbell traffic.
  std::vector<Bytes> all;
  ASSERT_TRUE(control().allgather(blob_of(rank(), 2), &all).ok());
  EXPECT_EQ(all.back(), blob_of(size() - 1, 2));
}

// A ring that reaches a rank after its control plane has cancelled the doorbell's
// receive stays in MPI's queue of unexpected messages. MPI hands a freed
// communicator's context id to the next one made the same way, so the next
// control plane (the next kolo_init) received the old ring: it took an old
// session's cycle for a ring in its own, did not ring for its cycles itself, and
// ranks on other nodes slept until a stall timer woke them (CI, multihost
// allreduce_api_test.2x2: 60 s per allreduce). Planes made one after the other
// must not hear each other's rings.
TEST(MpiControlPlane, ARingLeftFromAnEarlierPlaneIsNotHeardByTheNext) {
  transport::Topology topology = control().topology();
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    std::unique_ptr<MpiControlPlane> earlier;
    ASSERT_TRUE(MpiControlPlane::create(testing::dup_world_comms(), topology, &earlier).ok());
    // The others cancel their receive before rank 0 rings: every ring arrives late.
    if (rank() != 0) earlier.reset();
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank() == 0) {
      for (uint64_t cycle : {uint64_t{7000}, uint64_t{7001}}) ASSERT_TRUE(earlier->ring(cycle).ok());
      earlier.reset();  // waits until the rings are sent
    }
    MPI_Barrier(MPI_COMM_WORLD);
    std::unique_ptr<MpiControlPlane> next;
    ASSERT_TRUE(MpiControlPlane::create(testing::dup_world_comms(), topology, &next).ok());
    if (rank() != 0) {
      EXPECT_FALSE(eventually([&] { return next->rung(0); }, std::chrono::milliseconds(300)))
          << "an earlier control plane's ring was heard by the next one";
    }
    EXPECT_TRUE(next->barrier().ok());
  }
}

TEST(MpiControlPlane, SeparateControlPlaneOnItsOwnCommunicator) {
  // A second control plane over fresh communicators: its doorbell and collectives
  // do not see the world's traffic.
  transport::Topology topology = control().topology();
  std::unique_ptr<MpiControlPlane> other;
  ASSERT_TRUE(MpiControlPlane::create(testing::dup_world_comms(), topology, &other).ok());
  EXPECT_FALSE(other->rung(0)) << "the world's rings must not reach another communicator";
  std::vector<Bytes> all;
  ASSERT_TRUE(other->allgather(std::to_string(rank()), &all).ok());
  ASSERT_EQ(all.size(), static_cast<size_t>(size()));
  EXPECT_EQ(all[size() - 1], std::to_string(size() - 1));
  ASSERT_TRUE(other->barrier().ok());
}

}  // namespace
}  // namespace kolo::mpi
