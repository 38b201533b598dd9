// Hang diagnosis with ranks as threads: a stall report names what the missing rank
// submitted instead and how long it has been idle, and every rank dumps its flight
// recorder — on a stall, and on SIGUSR1.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <thread>

#include "core/flight_recorder.h"
#include "loopback_job.h"
#include "read_file.h"

namespace kolo::core::testing {
namespace {

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

using kolo_test::read_file;

// A directory of this test process's own (CTest runs test cases side by side).
std::string fresh_dir() {
  const std::string dir =
      ::testing::TempDir() + "kolo_flight_runtime_test." + std::to_string(getpid());
  mkdir(dir.c_str(), 0755);
  for (int r = 0; r < 2; ++r) std::remove(flight_dump_path(dir, r).c_str());
  return dir;
}

// Sends this process's stderr to a file while alive (kolo logs with write(2)).
class StderrCapture {
 public:
  explicit StderrCapture(const std::string& dir) : path_(dir + "/stderr.txt") {
    std::fflush(stderr);
    saved_ = dup(STDERR_FILENO);
    const int fd = open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, STDERR_FILENO);
    close(fd);
  }
  ~StderrCapture() { stop(); }
  std::string stop() {
    if (saved_ >= 0) {
      std::fflush(stderr);
      dup2(saved_, STDERR_FILENO);
      close(saved_);
      saved_ = -1;
    }
    return read_file(path_);
  }

 private:
  std::string path_;
  int saved_ = -1;
};

// Waits up to `seconds` for the file to hold `part`.
std::string wait_for(const std::string& path, const std::string& part, double seconds) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  std::string text;
  while (std::chrono::steady_clock::now() < until) {
    text = read_file(path);
    if (has(text, part)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return text;
}

Config flight_config(const std::string& dir) {
  Config config;
  config.flight_recorder = 64;
  config.flight_recorder_dir = dir;
  return config;
}

void common_ops(LoopbackJob& job, int n) {
  job.run([&](int, Runtime& rt) {
    for (int i = 0; i < n; ++i) {
      std::vector<float> v(4, 1.0f);
      ASSERT_EQ(wait_code(submit(rt, "step/" + std::to_string(i), v.data(), v.data(), 4,
                                 DataType::kFloat32)),
                Code::kOk);
    }
  });
}

TEST(FlightRuntime, StallReportNamesWhatTheMissingRankSubmittedAndEveryRankDumps) {
  const std::string dir = fresh_dir();
  Config config = flight_config(dir);
  config.stall_check_seconds = 0.3;
  // The common steps must not stall however far apart the ranks' threads run
  // (seconds, on a loaded machine under a sanitizer), and the report naming both
  // ranks comes once both names have waited 0.3 s.
  config.stall_shutdown_seconds = 3.0;
  StderrCapture capture(dir);
  {
    LoopbackJob job(2, config);
    common_ops(job, 3);
    std::vector<float> a(4, 1.0f), b(4, 1.0f);
    auto y = submit(job.rank(0), "grad_y", a.data(), a.data(), 4, DataType::kFloat32);
    auto x = submit(job.rank(1), "grad_x", b.data(), b.data(), 4, DataType::kFloat32);
    EXPECT_EQ(wait_code(y), Code::kStalled);
    EXPECT_EQ(wait_code(x), Code::kStalled);
  }
  const std::string log = capture.stop();
  EXPECT_TRUE(has(log, "Missing ranks: 0: [grad_x]; 1: [grad_y]")) << log;
  EXPECT_TRUE(has(log, "rank 1 submitted instead [grad_x] and has been idle for ")) << log;
  EXPECT_TRUE(has(log, "rank 0 submitted instead [grad_y] and has been idle for ")) << log;
  EXPECT_TRUE(has(log, " s since its last submission")) << log;
  for (int r = 0; r < 2; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    const std::string dump = read_file(flight_dump_path(dir, r));
    EXPECT_TRUE(
        has(dump, "\"rank\": " + std::to_string(r) + ", \"size\": 2, \"reason\": \"stall\""))
        << dump;
    EXPECT_TRUE(has(dump, "{\"seq\": 1, \"name\": \"step/0\"")) << dump;
    EXPECT_TRUE(has(dump, "\"state\": \"done\", \"status\": \"KOLO_OK\"")) << dump;
    const std::string mine = r == 0 ? "grad_y" : "grad_x";
    EXPECT_TRUE(has(dump, "{\"seq\": 4, \"name\": \"" + mine + "\"")) << dump;
    EXPECT_TRUE(has(log, "wrote the last 4 operations to " + flight_dump_path(dir, r))) << log;
  }
  // The dump after the stalled names failed records the failure.
  EXPECT_TRUE(has(read_file(flight_dump_path(dir, 1)),
                  "\"state\": \"failed\", \"status\": \"KOLO_ERR_STALLED\""));
}

TEST(FlightRuntime, SigusrOneDumpsEveryRankWithoutStoppingTheJob) {
  const std::string dir = fresh_dir();
  LoopbackJob job(2, flight_config(dir));
  common_ops(job, 5);
  ASSERT_EQ(kill(getpid(), SIGUSR1), 0);
  for (int r = 0; r < 2; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    const std::string dump = wait_for(flight_dump_path(dir, r), "step/4", 60.0);
    EXPECT_TRUE(has(dump, "\"reason\": \"SIGUSR1\"")) << dump;
    EXPECT_TRUE(has(dump, "\"recorded\": 5")) << dump;
    EXPECT_FALSE(has(dump, "\"state\": \"submitted\"")) << dump;
  }
  common_ops(job, 2);  // the job goes on
}

TEST(FlightRuntime, OffMeansNoDumpAndSigusrOneKeepsItsDefault) {
  const std::string dir = fresh_dir();
  Config config = flight_config(dir);
  config.flight_recorder = 0;
  config.stall_check_seconds = 0.2;
  config.stall_shutdown_seconds = 0.5;
  LoopbackJob job(2, config);
  std::vector<float> a(4, 1.0f);
  EXPECT_EQ(wait_code(submit(job.rank(0), "alone", a.data(), a.data(), 4, DataType::kFloat32)),
            Code::kStalled);
  struct sigaction now;
  ASSERT_EQ(sigaction(SIGUSR1, nullptr, &now), 0);
  EXPECT_EQ(now.sa_handler, SIG_DFL);
  EXPECT_FALSE(std::ifstream(flight_dump_path(dir, 0)).good());
}

}  // namespace
}  // namespace kolo::core::testing
