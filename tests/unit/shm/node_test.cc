// The node layer (transports/shm/node.h) made through the loopback world's
// control plane — ranks as threads, no MPI anywhere: the segment's layout, the
// shm allreduce, collectives and AND on it, pretend nodes with a segment each,
// the name gone once every rank has mapped it, a dead job's segment reclaimed,
// ranks that disagree failing alike, one calibration for both engines, and the
// board's verdict on a silent peer.
#include "transports/shm/node.h"

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/unit/algorithms/spawn.h"
#include "transports/shm/allreduce.h"
#include "transports/shm/board.h"
#include "transports/shm/collectives.h"
#include "transports/shm/node_and.h"
#include "transports/shm/transport.h"

namespace kolo::shm {
namespace {

using kolo::testing::spawn;
using transport::CollectiveView;

bool exists(const std::string& name) {
  struct stat st;
  return stat(("/dev/shm" + name).c_str(), &st) == 0;
}

NodeOptions all_regions(size_t slot_bytes) {
  NodeOptions o;
  o.allreduce_slot_bytes = slot_bytes;
  o.collectives_slot_bytes = slot_bytes;
  o.node_and = true;
  return o;
}

// A node layer over `world`'s control plane; fails the test (not the process)
// when it cannot be made.
std::shared_ptr<Node> make_node(transport::World& world, const NodeOptions& options) {
  std::shared_ptr<Node> node;
  Status s = Node::create(*world.control, options, &node);
  EXPECT_TRUE(s.ok()) << s.to_string();
  return node;
}

TEST(NodeLayout, PartsAndRegionsArePageAlignedAndApart) {
  for (int n : {1, 2, 3, 8}) {
    const Layout l = layout_for(all_regions(size_t{512} << 10), n);
    SCOPED_TRACE("local size " + std::to_string(n));
    EXPECT_EQ(l.first_part % Layout::kPage, 0u);
    EXPECT_EQ(l.part_bytes % Layout::kPage, 0u);
    EXPECT_EQ(l.total_bytes, l.first_part + static_cast<size_t>(n) * l.part_bytes);
    // The lines of the first page, then each region after the one before.
    EXPECT_LT(Layout::kDecision + Layout::kLine, Layout::kPage);
    EXPECT_GE(l.node_and, Layout::kPage);
    EXPECT_GE(l.allreduce, l.node_and + l.node_and_bytes);
    EXPECT_GE(l.collectives, l.allreduce + l.allreduce_bytes);
    EXPECT_LE(l.collectives + l.collectives_bytes, l.part_bytes);
    for (size_t offset : {l.node_and, l.allreduce, l.collectives}) EXPECT_EQ(offset % Layout::kPage, 0u);
    EXPECT_EQ(l.allreduce_bytes, ShmAllreduce::region_bytes(size_t{512} << 10));
  }
  const Layout none = layout_for(NodeOptions{}, 4);
  EXPECT_EQ(none.part_bytes, Layout::kPage) << "no regions asked: the first page only";
  EXPECT_EQ(none.allreduce_bytes + none.collectives_bytes + none.node_and_bytes, 0u);
}

// The shm allreduce, the collectives and the AND on a node made through the
// loopback control plane: exact results, every rank alike.
TEST(NodeOverLoopback, EnginesRunWithoutMpi) {
  constexpr int kRanks = 3;
  spawn(kRanks, [](int rank, transport::World& world) {
    std::shared_ptr<Node> node = make_node(world, all_regions(4096));
    ASSERT_NE(node, nullptr);
    EXPECT_EQ(node->local_rank(), rank);
    EXPECT_EQ(node->world_ranks(), (std::vector<int>{0, 1, 2}));
    // Local rank 0 unlinks once every rank has it mapped, as it returns.
    ASSERT_TRUE(world.control->barrier().ok());
    EXPECT_FALSE(exists(node->name())) << "the name outlived the creation";
    std::unique_ptr<ShmAllreduce> allreduce;
    std::unique_ptr<ShmCollectives> collectives;
    std::unique_ptr<NodeAnd> node_and;
    ASSERT_TRUE(ShmAllreduce::create(node, nullptr, {}, &allreduce).ok());
    ASSERT_TRUE(ShmCollectives::create(node, nullptr, {}, &collectives).ok());
    ASSERT_TRUE(NodeAnd::create(node, nullptr, &node_and).ok());
    for (int64_t count : {int64_t{0}, int64_t{1}, int64_t{1000}, int64_t{100003}}) {
      std::vector<float> v(static_cast<size_t>(count));
      for (int64_t i = 0; i < count; ++i) v[i] = static_cast<float>((rank + 1) * (i % 13));
      ASSERT_TRUE(allreduce->run(v.data(), v.data(), count, DataType::kFloat32, ReduceOp::kSum).ok());
      int64_t wrong = 0;
      for (int64_t i = 0; i < count; ++i) wrong += v[i] != static_cast<float>(6 * (i % 13));
      EXPECT_EQ(wrong, 0) << "allreduce of " << count;
    }
    // An allgather of uneven blocks, then a reducescatter with a postscale.
    std::vector<int64_t> counts = {5, 0, 700};
    std::vector<int32_t> in(static_cast<size_t>(counts[rank]), rank * 1000), out(705, -1);
    CollectiveView g;
    g.input = in.data();
    g.output = out.data();
    g.dtype = DataType::kInt32;
    g.recv_counts = counts;
    ASSERT_TRUE(collectives->run(Collective::kAllgather, g).ok());
    EXPECT_EQ(out[0], 0);
    EXPECT_EQ(out[4], 0);
    EXPECT_EQ(out[5], 2000);
    EXPECT_EQ(out[704], 2000);
    std::vector<float> whole(30, static_cast<float>(rank + 1)), mine(10, 0);
    CollectiveView rs;
    rs.input = whole.data();
    rs.output = mine.data();
    rs.dtype = DataType::kFloat32;
    rs.recv_counts = {10, 10, 10};
    rs.reduction.postscale = 0.5;
    ASSERT_TRUE(collectives->run(Collective::kReducescatter, rs).ok());
    EXPECT_EQ(mine[0], 3.0f);
    EXPECT_EQ(mine[9], 3.0f);
    std::vector<uint64_t> bits = {~uint64_t{0}, ~(uint64_t{1} << rank)};
    ASSERT_TRUE(node_and->run(&bits).ok());
    EXPECT_EQ(bits[1], ~uint64_t{7});
    EXPECT_FALSE(node_and->unanimous());
    // Each region serves one engine.
    std::unique_ptr<ShmAllreduce> second;
    EXPECT_EQ(ShmAllreduce::create(node, nullptr, {}, &second).code(), Code::kInternal);
  });
}

// Through the Transport seam, as a world would offer it.
TEST(NodeOverLoopback, TheShmTransport) {
  spawn(2, [](int rank, transport::World& world) {
    std::shared_ptr<Node> node = make_node(world, all_regions(size_t{64} << 10));
    ASSERT_NE(node, nullptr);
    std::unique_ptr<ShmAllreduce> allreduce;
    std::unique_ptr<ShmCollectives> collectives;
    ASSERT_TRUE(ShmAllreduce::create(node, nullptr, {}, &allreduce).ok());
    ASSERT_TRUE(ShmCollectives::create(node, nullptr, {}, &collectives).ok());
    ShmTransport shm(std::move(allreduce), std::move(collectives));
    std::vector<double> a(3000, rank + 1.0), b(17, 2.0 * rank);
    transport::Bucket bucket;
    bucket.dtype = DataType::kFloat64;
    bucket.tensors = {{a.data(), a.data(), 3000, nullptr}, {b.data(), b.data(), 17, nullptr}};
    bucket.count = 3017;
    bucket.reduction.postscale = 0.5;
    ASSERT_TRUE(shm.allreduce(bucket)->wait().ok());
    EXPECT_EQ(a[2999], 1.5);
    EXPECT_EQ(b[16], 1.0);
    std::vector<float> buf(40, rank == 1 ? 7.0f : 0.0f);
    CollectiveView v;
    v.input = buf.data();
    v.output = buf.data();
    v.dtype = DataType::kFloat32;
    v.count = 40;
    v.root = 1;
    ASSERT_TRUE(shm.collective(Collective::kBroadcast, v)->wait().ok());
    EXPECT_EQ(buf[39], 7.0f);
  });
}

// Pretend nodes of 2: each has its own segment (named by its node), and an
// allreduce sums over its node only.
TEST(NodeOverLoopback, EachNodeHasItsOwnSegment) {
  spawn(
      4,
      [](int rank, transport::World& world) {
        std::shared_ptr<Node> node = make_node(world, all_regions(4096));
        ASSERT_NE(node, nullptr);
        EXPECT_EQ(node->local_size(), 2);
        EXPECT_EQ(node->world_ranks(), (std::vector<int>{rank / 2 * 2, rank / 2 * 2 + 1}));
        std::unique_ptr<ShmAllreduce> allreduce;
        ASSERT_TRUE(ShmAllreduce::create(node, nullptr, {}, &allreduce).ok());
        std::vector<int32_t> v(5000, rank);
        ASSERT_TRUE(allreduce->run(v.data(), v.data(), 5000, DataType::kInt32, ReduceOp::kSum).ok());
        EXPECT_EQ(v[4999], rank / 2 * 4 + 1);  // the node's two ranks
      },
      2);
}

// A child that creates a segment the way a node's local rank 0 does and is
// killed before it unlinks it: the next job on the host (here, a node layer
// made over loopback) removes what it left.
TEST(NodeOverLoopback, ASegmentLeftByAKilledJobIsReclaimed) {
  const std::string left = Segment::name(0x5eed5eed5eedULL ^ static_cast<uint64_t>(getpid()), 0);
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t child = fork();
  if (child == 0) {
    SegmentHeader h;
    h.bytes = 8192;
    std::unique_ptr<Segment> s;
    char byte = Segment::create(left, h, &s).ok() ? 1 : 0;
    if (write(ready[1], &byte, 1) != 1) _exit(2);
    for (;;) pause();
  }
  char byte = 0;
  ASSERT_EQ(read(ready[0], &byte, 1), 1);
  ASSERT_EQ(byte, 1);
  // Checked while its creator lives: once it is dead, any segment created on the
  // host may reclaim it (Segment::create), a test running beside this one too.
  ASSERT_TRUE(exists(left));
  kill(child, SIGKILL);
  ASSERT_EQ(waitpid(child, nullptr, 0), child);
  spawn(2, [](int, transport::World& world) { EXPECT_NE(make_node(world, NodeOptions{}), nullptr); });
  EXPECT_FALSE(exists(left)) << "the killed job's segment is still there";
  close(ready[0]);
  close(ready[1]);
}

// Ranks that ask for different regions fail alike, with one message, and leave
// nothing behind.
TEST(NodeOverLoopback, RanksThatDisagreeFailAlike) {
  std::vector<Status> got(3);
  spawn(3, [&](int rank, transport::World& world) {
    NodeOptions o = all_regions(4096);
    if (rank == 2) o.collectives_slot_bytes = 8192;
    std::shared_ptr<Node> node;
    got[rank] = Node::create(*world.control, o, &node);
    EXPECT_EQ(node, nullptr);
  });
  for (const Status& s : got) {
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.to_string();
    EXPECT_EQ(s.message(), got[0].message());
  }
  EXPECT_NE(got[0].message().find("ranks 0 and 2 ask for different regions"), std::string::npos)
      << got[0].message();
}

// The loopback control plane, except that its `fail_at`-th allgather (from 1)
// fails on every rank, as a world's control plane does when its liveness check
// finds a peer dead in the middle of a collective.
class PeerDiesAt : public transport::ControlPlane {
 public:
  PeerDiesAt(transport::ControlPlane& inner, int fail_at) : inner_(inner), fail_at_(fail_at) {}
  const transport::Topology& topology() const override { return inner_.topology(); }
  Status allgather(const transport::Bytes& mine, std::vector<transport::Bytes>* all) override {
    if (++calls_ == fail_at_) return Status(Code::kRankFailed, "rank 1 died (test)");
    return inner_.allgather(mine, all);
  }
  Status gather(const transport::Bytes& mine, std::vector<transport::Bytes>* all, int root) override {
    return inner_.gather(mine, all, root);
  }
  Status broadcast(transport::Bytes* blob, int root) override { return inner_.broadcast(blob, root); }
  Status bitwise_and(std::vector<uint64_t>* bits) override { return inner_.bitwise_and(bits); }
  Status barrier() override { return inner_.barrier(); }
  Status ring(uint64_t cycle) override { return inner_.ring(cycle); }
  bool rung(uint64_t cycle) override { return inner_.rung(cycle); }

 private:
  transport::ControlPlane& inner_;
  const int fail_at_;
  int calls_ = 0;
};

// The kolo-* segments in /dev/shm that this process made.
std::vector<std::string> segments_made_here() {
  std::vector<std::string> mine;
  DIR* dir = opendir("/dev/shm");
  if (dir == nullptr) return mine;
  while (dirent* entry = readdir(dir)) {
    if (std::strncmp(entry->d_name, "kolo-", 5) != 0) continue;
    const int fd = open((std::string("/dev/shm/") + entry->d_name).c_str(), O_RDONLY);
    SegmentHeader h;
    if (fd >= 0 && pread(fd, &h, sizeof(h), 0) == static_cast<ssize_t>(sizeof(h)) &&
        h.magic == SegmentHeader::kMagic && h.creator_pid == getpid())
      mine.push_back(entry->d_name);
    if (fd >= 0) close(fd);
  }
  closedir(dir);
  return mine;
}

// A peer that dies during Node::create — before the segment is made, after
// local rank 0 made it, after every rank mapped it — fails create() on every
// rank with the control plane's error, in words that say where, and leaves no
// segment behind.
TEST(NodeOverLoopback, APeerDyingDuringCreationIsAnErrorAndLeavesNothing) {
  for (int fail_at : {1, 2, 3}) {
    SCOPED_TRACE("failing allgather " + std::to_string(fail_at));
    std::vector<Status> got(2);
    spawn(2, [&](int rank, transport::World& world) {
      PeerDiesAt plane(*world.control, fail_at);
      std::shared_ptr<Node> node;
      got[rank] = Node::create(plane, all_regions(4096), &node);
      EXPECT_EQ(node, nullptr);
    });
    for (const Status& s : got) {
      EXPECT_EQ(s.code(), Code::kRankFailed) << s.to_string();
      EXPECT_EQ(s.message(), "creating the node's shared memory: rank 1 died (test)");
    }
    EXPECT_EQ(segments_made_here(), std::vector<std::string>{}) << "a segment was left behind";
  }
}

// The loopback control plane under a topology of the test's choosing.
class Claims : public PeerDiesAt {
 public:
  Claims(transport::ControlPlane& inner, transport::Topology claimed)
      : PeerDiesAt(inner, 0), claimed_(claimed) {}
  const transport::Topology& topology() const override { return claimed_; }

 private:
  transport::Topology claimed_;
};

// A world whose topology does not number a node's ranks 0..n-1 once each gets
// the same error on every rank, naming the node, and no segment.
TEST(NodeOverLoopback, TopologiesThatDoNotAddUpFailAlike) {
  struct Case {
    int local_size_of_rank_1;
    int local_rank_of_rank_1;
    int local_size_of_others;
    const char* says;
  };
  const Case cases[] = {
      {2, 0, 2, "ranks 0 and 1 disagree about node 0 (local rank 0 of 2, local rank 0 of 2)"},
      {3, 1, 2, "ranks 0 and 1 disagree about node 0 (local rank 0 of 2, local rank 1 of 3)"},
      {3, 1, 3, "node 0 has 2 ranks, which say it has 3"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.says);
    std::vector<Status> got(2);
    spawn(2, [&](int rank, transport::World& world) {
      transport::Topology t = world.control->topology();
      t.local_size = rank == 1 ? c.local_size_of_rank_1 : c.local_size_of_others;
      if (rank == 1) t.local_rank = c.local_rank_of_rank_1;
      Claims plane(*world.control, t);
      std::shared_ptr<Node> node;
      got[rank] = Node::create(plane, NodeOptions{}, &node);
    });
    for (const Status& s : got) {
      EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.to_string();
      EXPECT_NE(s.message().find(c.says), std::string::npos) << s.message();
    }
  }
  EXPECT_EQ(segments_made_here(), std::vector<std::string>{});
}

// Note [One calibration for the node]: the allreduce's and the collectives'
// streamable calls feed one clock, so 70 calls of each (140 in all) measure at
// calls 0, 64 and 128 — three times, not twice each — on every rank alike.
TEST(NodeOverLoopback, OneCalibrationForBothEngines) {
  std::vector<uint64_t> measured(2);
  std::vector<std::vector<int>> verdicts(2);
  spawn(2, [&](int rank, transport::World& world) {
    std::shared_ptr<Node> node = make_node(world, all_regions(size_t{64} << 10));
    ASSERT_NE(node, nullptr);
    std::unique_ptr<ShmAllreduce> allreduce;
    std::unique_ptr<ShmCollectives> collectives;
    ASSERT_TRUE(ShmAllreduce::create(node, nullptr, {}, &allreduce).ok());
    ASSERT_TRUE(ShmCollectives::create(node, nullptr, {}, &collectives).ok());
    const int64_t floats = static_cast<int64_t>(ShmAllreduce::kStreamMinBytes / 4);  // streamable
    std::vector<float> v(static_cast<size_t>(floats));
    std::vector<float> block(600, static_cast<float>(rank)), all(1200);  // 2.4 KiB blocks
    CollectiveView g;
    g.input = block.data();
    g.output = all.data();
    g.dtype = DataType::kFloat32;
    g.recv_counts = {600, 600};
    for (int i = 0; i < 70; ++i) {
      std::fill(v.begin(), v.end(), static_cast<float>(i));
      ASSERT_TRUE(allreduce->run(v.data(), v.data(), floats, DataType::kFloat32, ReduceOp::kSum).ok());
      ASSERT_EQ(v.back(), 2.0f * i);
      ASSERT_TRUE(collectives->run(Collective::kAllgather, g).ok());
      ASSERT_EQ(all[1199], 1.0f);
      verdicts[rank].push_back(allreduce->streaming() ? 1 : 0);
      verdicts[rank].push_back(collectives->streaming_slots() ? 1 : 0);
    }
    measured[rank] = node->core_distance().measurements();
  });
  EXPECT_EQ(measured[0], 3u);
  EXPECT_EQ(measured[1], 3u);
  EXPECT_EQ(verdicts[0], verdicts[1]) << "the ranks followed different verdicts";
}

// The board: a peer that stops beating is reported, naming it, after the
// timeout; peers that beat are not.
TEST(NodeBoard, ASilentPeerFailsTheCheckAndBeatingPeersDoNot) {
  constexpr auto kTimeout = std::chrono::milliseconds(100);
  spawn(2, [&](int rank, transport::World& world) {
    std::shared_ptr<Node> node = make_node(world, NodeOptions{});
    ASSERT_NE(node, nullptr);
    std::unique_ptr<NodeBoard> board;
    ASSERT_TRUE(NodeBoard::create(node, kTimeout, &board).ok());
    // Both beat (their beaters): three timeouts pass without a failure.
    const auto quiet_until = std::chrono::steady_clock::now() + 3 * kTimeout;
    while (std::chrono::steady_clock::now() < quiet_until) {
      EXPECT_TRUE(board->check().ok());
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    ASSERT_TRUE(world.control->barrier().ok());
    if (rank == 1) board.reset();  // rank 1 falls silent
    ASSERT_TRUE(world.control->barrier().ok());
    if (rank == 0) {
      Status s;
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
      while (s.ok() && std::chrono::steady_clock::now() < give_up) {
        s = board->check();
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
      EXPECT_EQ(s.code(), Code::kRankFailed);
      EXPECT_NE(s.message().find("rank 1 (pid " + std::to_string(getpid()) +
                                 " on this node) has not been heard from"),
                std::string::npos)
          << s.message();
      EXPECT_TRUE(board->failed());
      EXPECT_EQ(board->check().message(), s.message()) << "a failure is for good";
    }
    ASSERT_TRUE(world.control->barrier().ok());
  });
}

}  // namespace
}  // namespace kolo::shm
