// Forming a socket world (transports/socket/socket_world.h): topology, the
// rendezvous checks and the handshake's, with ranks as threads.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>

#include "tests/unit/socket/socket_job.h"
#include "transports/socket/mesh.h"

namespace kolo::socket {
namespace {

using testing::SocketJob;
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
    ASSERT_NE(w.p2p, nullptr);
    std::vector<std::string> names;
    for (auto& t : w.transports) names.push_back(t->name());
    // The ring and Adasum over the sockets; no native, shm or hierarchical ones
    // (the device transport where this build has it).
    ASSERT_GE(names.size(), 2u);
    EXPECT_EQ(names[0], "ring");
    EXPECT_EQ(names[1], "adasum");
    for (const std::string& name : names) EXPECT_TRUE(name == "ring" || name == "adasum" || name == "nccl");
    EXPECT_TRUE(w.control->barrier().ok());
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

TEST(Mesh, GarbageOnTheListenerIsDroppedAndTheMeshStillForms) {
  Endpoint where;
  ASSERT_TRUE(resolve("127.0.0.1", 0, &where).ok());
  Fd la, lb;
  Endpoint ea, eb;
  ASSERT_TRUE(listen_on(where, &la, &ea).ok());
  ASSERT_TRUE(listen_on(where, &lb, &eb).ok());
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
