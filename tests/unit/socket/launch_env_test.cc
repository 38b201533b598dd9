// How kolo_init picks its world and reads the socket world's options from a
// launcher's environment (transports/socket/launch_env.h).
#include "transports/socket/launch_env.h"

#include <gtest/gtest.h>

#include <map>

namespace kolo::socket {
namespace {

EnvLookup env_of(std::map<std::string, std::string> vars) {
  return [vars](const char* name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

const std::map<std::string, std::string> kTorchrun = {
    {"MASTER_ADDR", "10.1.2.3"}, {"MASTER_PORT", "29500"}, {"RANK", "3"}, {"WORLD_SIZE", "4"},
    {"LOCAL_RANK", "1"},         {"LOCAL_WORLD_SIZE", "2"}, {"TORCHELASTIC_RUN_ID", "job7"},
    {"TORCHELASTIC_RESTART_COUNT", "2"}};

WorldChoice choice(std::map<std::string, std::string> vars, const std::string& knob = "auto") {
  Config c;
  c.world = knob;
  std::string why;
  const WorldChoice w = choose_world(c, env_of(std::move(vars)), &why);
  EXPECT_FALSE(why.empty());
  return w;
}

TEST(LaunchEnv, TorchrunWithoutAnMpiLauncherMeansSockets) {
  EXPECT_EQ(choice(kTorchrun), WorldChoice::kSocket);
  EXPECT_EQ(choice({}), WorldChoice::kMpi);
  auto under_mpiexec = kTorchrun;
  under_mpiexec["PMI_RANK"] = "0";
  EXPECT_EQ(choice(under_mpiexec), WorldChoice::kMpi);
  auto partial = kTorchrun;
  partial.erase("MASTER_PORT");
  EXPECT_EQ(choice(partial), WorldChoice::kMpi);
  EXPECT_EQ(choice(under_mpiexec, "socket"), WorldChoice::kSocket);
  EXPECT_EQ(choice(kTorchrun, "mpi"), WorldChoice::kMpi);
}

TEST(LaunchEnv, TorchrunsVariablesBecomeTheOptions) {
  Config c;
  SocketWorldOptions o;
  ASSERT_TRUE(options_from_env(c, env_of(kTorchrun), &o).ok());
  EXPECT_EQ(o.rank, 3);
  EXPECT_EQ(o.size, 4);
  EXPECT_EQ(o.store_host, "10.1.2.3");
  EXPECT_EQ(o.store_port, 29501);  // torchrun's own store holds MASTER_PORT
  EXPECT_EQ(o.local_rank, 1);
  EXPECT_EQ(o.local_size, 2);
  EXPECT_EQ(o.generation, 2u);
  EXPECT_NE(o.token.find("job7"), std::string::npos);
  c.store_port = 4000;
  c.job_token = "secret";
  c.generation = 9;
  c.init_timeout_seconds = 2.5;
  ASSERT_TRUE(options_from_env(c, env_of(kTorchrun), &o).ok());
  EXPECT_EQ(o.store_port, 4000);
  EXPECT_EQ(o.token, "secret");
  EXPECT_EQ(o.generation, 9u);
  EXPECT_EQ(o.init_timeout, std::chrono::milliseconds(2500));
}

TEST(LaunchEnv, ABadVariableIsNamed) {
  auto bad = [](const std::string& name, const std::string& value) {
    auto vars = kTorchrun;
    if (value.empty()) {
      vars.erase(name);
    } else {
      vars[name] = value;
    }
    SocketWorldOptions o;
    Status s = options_from_env(Config(), env_of(vars), &o);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << name;
    EXPECT_NE(s.message().find(name), std::string::npos) << s.message();
    return s.message();
  };
  EXPECT_NE(bad("RANK", "4").find("from 0 to WORLD_SIZE-1"), std::string::npos);
  bad("RANK", "x");
  bad("WORLD_SIZE", "0");
  bad("MASTER_PORT", "70000");
  bad("MASTER_ADDR", "");
  bad("LOCAL_RANK", "2");
  EXPECT_NE(bad("MASTER_PORT", "65535").find("KOLO_STORE_PORT"), std::string::npos);
}

TEST(LaunchEnv, InitStoresArgumentsAreChecked) {
  SocketWorldOptions o;
  ASSERT_TRUE(options_for_store(Config(), env_of({}), "node0", 5000, 1, 2, "t", 3, &o).ok());
  EXPECT_EQ(o.store_host, "node0");
  EXPECT_EQ(o.store_port, 5000);
  EXPECT_EQ(o.generation, 3u);
  ASSERT_TRUE(options_for_store(Config(), env_of({}), "file:/tmp/job", 0, 0, 1, "", 0, &o).ok());
  EXPECT_EQ(o.store_directory, "/tmp/job");
  EXPECT_NE(options_for_store(Config(), env_of({}), "h", 0, 0, 1, "", 0, &o).message().find("port 0"),
            std::string::npos);
  EXPECT_NE(options_for_store(Config(), env_of({}), "h", 1, 2, 2, "", 0, &o).message().find("rank 2"),
            std::string::npos);
  EXPECT_NE(options_for_store(Config(), env_of({}), "h", 1, 0, 1, "", -1, &o).message().find("generation"),
            std::string::npos);
}

// With a bad knob elsewhere, the knobs that say how to meet are still read.
TEST(LaunchEnv, TheMeetingKnobsSurviveABadKnob) {
  auto vars = kTorchrun;
  vars["KOLO_FUSION_THRESHOLD"] = "banana";
  vars["KOLO_JOB_TOKEN"] = "secret";
  vars["KOLO_STORE_PORT"] = "4000";
  Config c;
  EXPECT_FALSE(load_config(env_of(vars), &c).ok());
  ASSERT_TRUE(load_config(meeting_env(env_of(vars)), &c).ok());
  EXPECT_EQ(c.job_token, "secret");
  EXPECT_EQ(c.store_port, 4000);
  EXPECT_EQ(c.fusion_threshold_bytes, 64 << 20);
  EXPECT_EQ(meeting_env(env_of(vars))("MASTER_ADDR"), "10.1.2.3");
}

}  // namespace
}  // namespace kolo::socket
