// The MPI world the tests of one executable share. A global test environment
// calls create_world once (kolo initialises MPI, since these tests' main does not)
// and destroys the world at the end; MPI is finalised at exit (Note [MPI_Finalize
// at exit] in mpi_world.cc). Tests reach it through
// test_world(), and must make their collective calls in the same order on every
// rank (a test that returns early on one rank would hang the others: prefer
// EXPECT_* over ASSERT_* around collective calls).
//
// Compiled with KOLO_TEST_SOCKET_WORLD, the world is the socket world instead,
// from what a launcher leaves in the environment (kolorun --world socket, as
// kolo_init reads it), so that a test of the transports runs unchanged on both
// worlds; kNativeTransport names the world's native collectives' transport.
#pragma once

#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "transport/world.h"
#include "transports/mpi/mpi_comm.h"
#include "transports/mpi/mpi_wait.h"
#include "transports/mpi/mpi_world.h"
#ifdef KOLO_TEST_SOCKET_WORLD
#include "common/knobs.h"
#include "transports/socket/launch_env.h"
#include "transports/socket/socket_world.h"
#endif

namespace kolo::mpi::testing {

inline std::unique_ptr<transport::World>& world_slot() {
  static std::unique_ptr<transport::World> world;
  return world;
}

inline transport::World& test_world() { return *world_slot(); }

inline transport::Transport* find_transport(const std::string& name) {
  for (auto& t : test_world().transports) {
    if (name == t->name()) return t.get();
  }
  return nullptr;
}

// Fresh communicators over MPI_COMM_WORLD, for tests that build their own
// control plane, point-to-point or transport with non-default options.
inline SharedComms dup_world_comms() {
  auto comms = std::make_shared<Comms>();
  for (MPI_Comm* comm : {&comms->control, &comms->data}) {
    MPI_Request request;
    MPI_Comm_idup(MPI_COMM_WORLD, comm, &request);
    EXPECT_TRUE(wait(&request, nullptr).ok());  // not MPI_Comm_dup: it spins
    MPI_Comm_set_errhandler(*comm, MPI_ERRORS_RETURN);
  }
  return comms;
}

#ifdef KOLO_TEST_SOCKET_WORLD
// The socket world has no native collectives: kolo's ring over its verbs serves.
constexpr const char* kNativeTransport = "ring";

class WorldEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    Config config;
    Status status = load_config(process_env(), &config);
    socket::SocketWorldOptions options;
    if (status.ok()) status = socket::options_from_env(config, process_env(), &options);
    auto world = std::make_unique<transport::World>();
    if (status.ok()) status = socket::create_world(options, world.get());
    ASSERT_TRUE(status.ok()) << status.to_string();
    world_slot() = std::move(world);
  }
  void TearDown() override { world_slot().reset(); }
};
#else
constexpr const char* kNativeTransport = "mpi";

class WorldEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    auto world = std::make_unique<transport::World>();
    Status status = create_world(WorldOptions{}, world.get());
    ASSERT_TRUE(status.ok()) << status.to_string();
    // kolo initialised MPI here, so finalising is the world's job.
    ASSERT_TRUE(static_cast<bool>(world->finalize));
    world_slot() = std::move(world);
  }
  void TearDown() override {
    world_slot().reset();
    int finalized = 1;
    MPI_Finalized(&finalized);
    // Finalising waits for every rank, so it is left to the process's exit.
    EXPECT_FALSE(finalized) << "destroying kolo's world should leave MPI_Finalize to exit";
  }
};
#endif

inline ::testing::Environment* const kWorldEnvironment =
    ::testing::AddGlobalTestEnvironment(new WorldEnvironment);

// Polls `ready` with short sleeps until it is true or `timeout` passes.
template <typename F>
bool eventually(F ready, std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!ready()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  return true;
}

}  // namespace kolo::mpi::testing
