// Forming a socket world (transports/socket/socket_world.h): topology, the
// rendezvous checks and the handshake's, with ranks as threads.
#include <gtest/gtest.h>
#include <poll.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

#include <atomic>

#include "tests/unit/socket/socket_job.h"
#include "transports/socket/mesh.h"

namespace kolo::socket {
namespace {

using testing::SocketJob;
using testing::StoreIn;
using std::chrono::milliseconds;

class WorldSizes : public ::testing::TestWithParam<int> {};

TEST_P(WorldSizes, EveryRankJoinsOneHost) {
  const int n = GetParam();
  SocketJob job;
  job.run_ok(n, [&](int r, transport::World& w) {
    const transport::Topology& t = w.control->topology();
    EXPECT_EQ(t.rank, r);
    EXPECT_EQ(t.size, n);
    EXPECT_EQ(t.local_rank, r);
    EXPECT_EQ(t.local_size, n);
    EXPECT_EQ(t.cross_size, 1);
    EXPECT_EQ(t.node, 0);
    ASSERT_NE(w.p2p, nullptr);
    std::vector<std::string> names;
    for (auto& t : w.transports) names.push_back(t->name());
    // The ring and Adasum over the sockets, and the node layer's shm (every rank
    // is on this host); no native or hierarchical ones (the device transport
    // where this build has it).
    ASSERT_GE(names.size(), 3u);
    EXPECT_EQ(names[0], "ring");
    EXPECT_EQ(names[1], "adasum");
    EXPECT_EQ(names[2], "shm");
    for (const std::string& name : names)
      EXPECT_TRUE(name == "ring" || name == "adasum" || name == "shm" || name == "nccl");
    // Data and the AND go through the node layer (carry_capacity > 0 only there).
    if (n > 1) {
      EXPECT_GT(w.control->carry_capacity(4), 0u);
    }
    EXPECT_TRUE(w.control->barrier().ok());
  });
}

// Where the node's segment cannot be made (here /dev/shm is a read-only tmpfs
// in each rank's own mount namespace), every rank gets the same verdict and
// the world forms over the sockets alone. Ranks are forked processes (the
// mount namespace is per process); skipped where this process may not unshare.
TEST(SocketWorld, WithoutAUsableDevShmTheWorldRunsOverTheSockets) {
  SocketJob job(StoreIn::kProcess);
  std::vector<pid_t> pids;
  for (int r = 0; r < 2; ++r) {
    const pid_t pid = fork();
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (unshare(CLONE_NEWNS) != 0 || mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
          mount("tmpfs", "/dev/shm", "tmpfs", MS_RDONLY, nullptr) != 0)
        _exit(77);
      transport::World w;
      if (!create_world(job.options(r, 2), &w).ok()) _exit(1);
      for (auto& t : w.transports)
        if (std::string(t->name()) == "shm") _exit(2);
      if (w.control->carry_capacity(4) != 0) _exit(3);
      std::vector<uint64_t> bits{~uint64_t{0} ^ (uint64_t{1} << r)};
      if (!w.control->bitwise_and(&bits).ok() || bits[0] != ~uint64_t{3}) _exit(4);
      _exit(w.control->barrier().ok() ? 0 : 5);
    }
    pids.push_back(pid);
  }
  std::vector<int> codes;
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    codes.push_back(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
  }
  if (codes[0] == 77 || codes[1] == 77) GTEST_SKIP() << "cannot mount a private /dev/shm here";
  EXPECT_EQ(codes[0], 0);
  EXPECT_EQ(codes[1], 0);
}

// Without the node layer (SocketWorldOptions::node_layer, as where /dev/shm
// cannot be used) the world runs over the sockets alone.
TEST(SocketWorld, WithoutTheNodeLayerEverythingGoesOverTheSockets) {
  SocketJob job;
  job.run(2, [](int, SocketWorldOptions* o) { o->node_layer = false; },
          [](int r, const Status& s, transport::World& w) {
            ASSERT_TRUE(s.ok()) << s.to_string();
            for (auto& t : w.transports) EXPECT_STRNE(t->name(), "shm");
            EXPECT_EQ(w.control->carry_capacity(4), 0u);
            std::vector<uint64_t> bits{~uint64_t{0} ^ (uint64_t{1} << r)};
            ASSERT_TRUE(w.control->bitwise_and(&bits).ok());
            EXPECT_EQ(bits[0], ~uint64_t{3});
          });
}

INSTANTIATE_TEST_SUITE_P(Socket, WorldSizes, ::testing::Values(1, 2, 3, 4));

TEST(SocketWorld, PretendNodesAndLauncherBlocksGiveTheTopology) {
  SocketJob job;
  // KOLO_TEST_NODE_SIZE=2 at 4 ranks: nodes {0,1} {2,3}.
  job.run(4, [](int, SocketWorldOptions* o) { o->test_node_size = 2; },
          [](int r, const Status& s, transport::World& w) {
            ASSERT_TRUE(s.ok()) << s.to_string();
            const transport::Topology& t = w.control->topology();
            EXPECT_EQ(t.local_rank, r % 2);
            EXPECT_EQ(t.local_size, 2);
            EXPECT_EQ(t.cross_rank, r / 2);
            EXPECT_EQ(t.cross_size, 2);
            EXPECT_EQ(t.node, r / 2);
            // Several nodes of equal size: no shm (one node only), and hierarchical
            // (the node layer's engines, kolo's cross engine over the sockets).
            int hierarchical = 0;
            for (auto& tr : w.transports) {
              EXPECT_STRNE(tr->name(), "shm");
              hierarchical += std::string(tr->name()) == "hierarchical" ? 1 : 0;
            }
            EXPECT_EQ(hierarchical, 1);
            // The doorbell reaches node and remote peers alike, and a ring from
            // another node wakes a sleeper on the node's futex at once.
            ASSERT_TRUE(w.control->barrier().ok());
            if (r == 3) {
              std::this_thread::sleep_for(milliseconds(100));
              ASSERT_TRUE(w.control->ring(5).ok());
            } else {
              const auto start = Clock::now();
              w.control->wait_for_ring(5, std::chrono::seconds(10), std::chrono::seconds(10));
              EXPECT_TRUE(w.control->rung(5)) << "rank " << r;
              EXPECT_LT(Clock::now() - start, milliseconds(1000)) << "rank " << r;
            }
            EXPECT_TRUE(w.control->barrier().ok());
          });
  // LOCAL_RANK / LOCAL_WORLD_SIZE of 3 + 1 ranks.
  job.run(4, [](int r, SocketWorldOptions* o) {
            o->local_size = r < 3 ? 3 : 1;
            o->local_rank = r < 3 ? r : 0;
          },
          [](int r, const Status& s, transport::World& w) {
            ASSERT_TRUE(s.ok()) << s.to_string();
            const transport::Topology& t = w.control->topology();
            EXPECT_EQ(t.local_size, r < 3 ? 3 : 1);
            EXPECT_EQ(t.local_rank, r < 3 ? r : 0);
            EXPECT_EQ(t.cross_size, r == 0 || r == 3 ? 2 : 1);
            EXPECT_EQ(t.node, r < 3 ? 0 : 1);
          });
}

TEST(SocketWorld, ASecondWorldOfTheSameRanksMeetsAgain) {
  SocketJob job;
  for (int round = 0; round < 3; ++round)
    job.run_ok(2, [](int, transport::World& w) { EXPECT_TRUE(w.control->barrier().ok()); });
}

TEST(SocketWorld, RanksWithDifferentSizesFailOnBothSides) {
  SocketJob job;
  job.run(2, [](int r, SocketWorldOptions* o) { o->size = r == 0 ? 2 : 3; },
          [](int r, const Status& s, transport::World&) {
            EXPECT_EQ(s.code(), Code::kInvalidArgument) << "rank " << r << ": " << s.to_string();
            EXPECT_NE(s.message().find("has world size"), std::string::npos) << s.message();
            EXPECT_NE(s.message().find("WORLD_SIZE differs"), std::string::npos) << s.message();
          });
}

TEST(SocketWorld, RanksOfDifferentGenerationsFailOnBothSides) {
  SocketJob job;
  job.run(2,
          [](int r, SocketWorldOptions* o) {
            o->generation = r == 0 ? 1 : 2;
            o->init_timeout = milliseconds(1500);
          },
          [](int r, const Status& s, transport::World&) {
            ASSERT_FALSE(s.ok()) << "rank " << r;
            if (r == 0) {  // the older one knows at once that it is stale
              EXPECT_NE(s.message().find("rank 1 is at generation 2"), std::string::npos) << s.message();
              EXPECT_NE(s.message().find("stale"), std::string::npos) << s.message();
            } else {  // the newer one waits for it, then says where it was
              EXPECT_EQ(s.code(), Code::kTimeout) << s.to_string();
              EXPECT_NE(s.message().find("rank 0 last joined generation 1"), std::string::npos)
                  << s.message();
            }
          });
}

TEST(SocketWorld, AMissingRankTimesOutNamingItAndTheStore) {
  SocketJob job;
  SocketWorldOptions o = job.options(0, 3);
  o.init_timeout = milliseconds(700);
  transport::World w;
  const auto start = Clock::now();
  Status s = create_world(o, &w);
  EXPECT_EQ(s.code(), Code::kTimeout) << s.to_string();
  EXPECT_NE(s.message().find("ranks 1, 2"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(job.store().to_string()), std::string::npos) << s.message();
  EXPECT_LT(Clock::now() - start, milliseconds(3000));
}

TEST(SocketWorld, AnUnreachableStoreFailsInTimeNamingIt) {
  SocketJob job;
  SocketWorldOptions o = job.options(1, 2);
  Fd fd;
  Endpoint nothing;
  Endpoint where;
  ASSERT_TRUE(resolve("127.0.0.1", 0, &where).ok());
  ASSERT_TRUE(listen_on(where, &fd, &nothing).ok());
  fd.reset();
  o.store_port = nothing.port();
  o.init_timeout = milliseconds(600);
  transport::World w;
  const auto start = Clock::now();
  Status s = create_world(o, &w);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find(nothing.to_string()), std::string::npos) << s.message();
  EXPECT_LT(Clock::now() - start, milliseconds(2000));
}

TEST(SocketWorld, AWrongTokenNeverReachesTheStore) {
  SocketJob job;
  SocketWorldOptions o = job.options(0, 1);
  o.token = "not-the-job's";
  transport::World w;
  Status s = create_world(o, &w);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("job token"), std::string::npos) << s.message();
}

TEST(SocketWorld, ABadInterfaceNameFailsEveryRankWithItsName) {
  SocketJob job;
  job.run(2, [](int r, SocketWorldOptions* o) { if (r == 1) o->ifname = "no-such-if0"; },
          [](int r, const Status& s, transport::World&) {
            ASSERT_FALSE(s.ok()) << "rank " << r;
            EXPECT_NE(s.message().find("KOLO_SOCKET_IFNAME=\"no-such-if0\""), std::string::npos)
                << "rank " << r << ": " << s.message();
          });
}

TEST(SocketWorld, AnInterfaceNameBindsItsAddress) {
  SocketJob job;
  job.run(2, [](int, SocketWorldOptions* o) { o->ifname = "lo"; },
          [](int r, const Status& s, transport::World& w) {
            ASSERT_TRUE(s.ok()) << s.to_string();
            EXPECT_TRUE(w.control->barrier().ok());
          });
}

// The handshake itself (mesh.h), below the rendezvous that catches most
// mismatches first: two ranks with the given identities.
struct Handshake {
  Status zero, one;
};

Handshake shake(MeshIdentity a, MeshIdentity b) {  // b's size may be larger
  Endpoint where;
  EXPECT_TRUE(resolve("127.0.0.1", 0, &where).ok());
  Fd la, lb;
  Endpoint ea, eb;
  EXPECT_TRUE(listen_on(where, &la, &ea).ok());
  EXPECT_TRUE(listen_on(where, &lb, &eb).ok());
  Handshake h;
  const auto deadline = Clock::now() + milliseconds(1500);
  std::thread t([&] {
    std::vector<PeerLink> links;
    std::vector<Endpoint> endpoints(static_cast<size_t>(b.size), eb);
    endpoints[0] = ea;
    h.one = form_mesh(b, lb, endpoints, deadline, &links);
  });
  std::vector<PeerLink> links;
  h.zero = form_mesh(a, la, {ea, eb}, deadline, &links);
  t.join();
  return h;
}

TEST(Mesh, AWrongTokenIsDroppedAndBothSidesSayWhy) {
  Handshake h = shake({0, 2, 0, "right", "h"}, {1, 2, 0, "wrong", "h"});
  EXPECT_EQ(h.zero.code(), Code::kTimeout) << h.zero.to_string();
  EXPECT_NE(h.zero.message().find("wrong job token"), std::string::npos) << h.zero.message();
  EXPECT_NE(h.one.message().find("job token"), std::string::npos) << h.one.message();
}

TEST(Mesh, AnotherSizeOrGenerationFailsBothSidesAtOnce) {
  for (auto [size, generation] : {std::pair<int, uint64_t>{3, 0}, {2, 5}}) {
    const auto start = Clock::now();
    Handshake h = shake({0, 2, 0, "t", "h"}, {1, size, generation, "t", "h"});
    EXPECT_LT(Clock::now() - start, milliseconds(1000));
    const std::string words = size != 2 ? "has world size 3" : "is at generation 5";
    EXPECT_NE(h.zero.message().find(words), std::string::npos) << h.zero.message();
    EXPECT_NE(h.one.message().find("refused the connection"), std::string::npos) << h.one.message();
    EXPECT_NE(h.one.message().find(words), std::string::npos) << h.one.message();
  }
}

// Rank 0's and rank 1's listeners on the loopback (call as ASSERT_NO_FATAL_FAILURE).
void listen_two(Fd* la, Endpoint* ea, Fd* lb, Endpoint* eb) {
  Endpoint where;
  ASSERT_TRUE(resolve("127.0.0.1", 0, &where).ok());
  ASSERT_TRUE(listen_on(where, la, ea).ok());
  ASSERT_TRUE(listen_on(where, lb, eb).ok());
}

// Note [A refused peer is gone] (mesh.cc): rank 0 published its address and
// exited; rank 1 learns it within about a second, not at its deadline.
TEST(Mesh, APublishedPeerThatRefusesIsGoneWithinASecond) {
  Fd la, lb;
  Endpoint ea, eb;
  ASSERT_NO_FATAL_FAILURE(listen_two(&la, &ea, &lb, &eb));
  la.reset();  // rank 0's process is gone
  std::vector<PeerLink> links;
  const auto start = Clock::now();
  Status s = form_mesh({1, 2, 0, "t", "h"}, lb, {ea, eb}, start + milliseconds(20000), &links);
  EXPECT_EQ(s.code(), Code::kRankFailed) << s.to_string();
  EXPECT_NE(s.message().find("rank 0 at " + ea.to_string()), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("has exited"), std::string::npos) << s.message();
  EXPECT_LT(Clock::now() - start, milliseconds(5000));
}

// Note [A reset at the handshake is a death] (mesh.cc): rank 0, a process of its
// own, accepts rank 1's connection and is killed (SIGKILL) with rank 1's hello
// unread, so its kernel resets the connection; rank 1's dial fails as a rank
// failure naming rank 0, which an elastic worker answers by joining the next
// generation.
TEST(Mesh, APeerKilledWithTheHelloUnreadIsARankFailure) {
  Fd la, lb;
  Endpoint ea, eb;
  ASSERT_NO_FATAL_FAILURE(listen_two(&la, &ea, &lb, &eb));
  const pid_t zero = fork();
  if (zero == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    pollfd listener{la.get(), POLLIN, 0};
    if (::poll(&listener, 1, 5000) != 1) _exit(1);
    const int c = ::accept(la.get(), nullptr, nullptr);
    pollfd hello{c, POLLIN, 0};
    if (c < 0 || ::poll(&hello, 1, 5000) != 1) _exit(2);
    raise(SIGKILL);  // the hello is here, unread
  }
  ASSERT_GT(zero, 0);
  la.reset();  // rank 0's listener lives in rank 0
  std::vector<PeerLink> links;
  const auto start = Clock::now();
  Status s = form_mesh({1, 2, 0, "t", "h"}, lb, {ea, eb}, start + milliseconds(10000), &links);
  int status = 0;
  waitpid(zero, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "rank 0 ended with " << status;
  EXPECT_EQ(s.code(), Code::kRankFailed) << s.to_string();
  EXPECT_NE(s.message().find("rank 0 at " + ea.to_string()), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("reset the connection at the handshake"), std::string::npos)
      << s.message();
  EXPECT_LT(Clock::now() - start, milliseconds(5000));
}

TEST(Mesh, GarbageOnTheListenerIsDroppedAndTheMeshStillForms) {
  Fd la, lb;
  Endpoint ea, eb;
  ASSERT_NO_FATAL_FAILURE(listen_two(&la, &ea, &lb, &eb));
  Fd stranger;
  ASSERT_TRUE(connect_to(ea, Clock::now() + milliseconds(1000), "rank 0", &stranger).ok());
  ASSERT_TRUE(write_all(stranger.get(), std::string(200, '\x17'), Clock::now() + milliseconds(500),
                        "rank 0").ok());
  Status one;
  const auto deadline = Clock::now() + milliseconds(3000);
  std::thread t([&] {
    std::this_thread::sleep_for(milliseconds(100));
    std::vector<PeerLink> links;
    one = form_mesh({1, 2, 0, "t", "h"}, lb, {ea, eb}, deadline, &links);
  });
  std::vector<PeerLink> links;
  Status zero = form_mesh({0, 2, 0, "t", "h"}, la, {ea, eb}, deadline, &links);
  t.join();
  EXPECT_TRUE(zero.ok()) << zero.to_string();
  EXPECT_TRUE(one.ok()) << one.to_string();
  ASSERT_EQ(links.size(), 1u);
  EXPECT_EQ(links[0].rank, 1);
  Frame f;
  EXPECT_FALSE(read_frame(stranger.get(), Clock::now() + milliseconds(500), "rank 0", &f, 1024).ok());
}

}  // namespace
}  // namespace kolo::socket
