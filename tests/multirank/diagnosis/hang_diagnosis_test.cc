// Hang diagnosis under mpiexec through the C API: the last rank submits a name the
// others do not; the stall warning on rank 0 names that rank, what it submitted
// instead and how long it has been idle; every rank writes its flight recorder
// dump (CTest then runs tools/kolo_flight.py on the dumps: see tests/CMakeLists.txt);
// and SIGUSR1 makes a rank dump without disturbing the job.
#include <fcntl.h>
#include <mpi.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <regex>
#include <thread>
#include <vector>

#include "../api/api_fixture.h"

namespace kolo_test {
namespace {

const ::testing::Environment* const kMpi = ::testing::AddGlobalTestEnvironment(new MpiEnvironment);

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

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// The directory CTest names (it runs the tool on it afterwards), or a fresh one.
std::string dump_dir(const std::string& sub) {
  const char* env = std::getenv("KOLO_TEST_FLIGHT_DIR");
  std::string dir = std::string(env ? env : ::testing::TempDir() + "kolo_flight") + "/" + sub;
  mkdir(dir.substr(0, dir.rfind('/')).c_str(), 0755);
  mkdir(dir.c_str(), 0755);
  return dir;
}

std::string dump_path(const std::string& dir, int rank) {
  return dir + "/kolo-flight-rank" + std::to_string(rank) + ".jsonl";
}

// Sends this process's stderr to a file while alive (kolo logs with write(2)).
class StderrCapture {
 public:
  explicit StderrCapture(const std::string& path) : path_(path) {
    saved_ = dup(STDERR_FILENO);
    const int fd = open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, STDERR_FILENO);
    close(fd);
  }
  ~StderrCapture() { stop(); }
  std::string stop() {
    if (saved_ >= 0) {
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

void common_steps(int n) {
  std::vector<float> v(16);
  for (int i = 0; i < n; ++i)
    ASSERT_EQ(
        allreduce("step/" + std::to_string(i), v.data(), v.data(), 16, KOLO_FLOAT32, KOLO_OP_SUM),
        KOLO_OK);
}

TEST(HangDiagnosis, StallNamesWhatTheMissingRankSubmittedAndEveryRankDumps) {
  const int rank = world_rank();
  const int size = world_size();
  const int odd = size - 1;  // the rank that submits another name
  const std::string dir = dump_dir("stall");
  std::remove(dump_path(dir, rank).c_str());
  setenv("KOLO_FLIGHT_RECORDER_DIR", dir.c_str(), 1);
  setenv("KOLO_FLIGHT_RECORDER", "256", 1);
  setenv("KOLO_STALL_CHECK_TIME_SECONDS", "0.5", 1);
  setenv("KOLO_STALL_SHUTDOWN_TIME_SECONDS", "3", 1);
  MPI_Barrier(MPI_COMM_WORLD);
  ASSERT_EQ(kolo_init(), KOLO_OK) << kolo_last_error();
  common_steps(5);

  const std::string log_path = dir + "/stderr.rank" + std::to_string(rank);
  std::string log;
  {
    StderrCapture capture(log_path);
    // The odd rank submits first, so that at any report it has been idle at least
    // as long as grad_y has waited (however late the ranks run, the bound below holds).
    std::vector<int32_t> v(4, 1);
    const std::string name = rank == odd ? "grad_x" : "grad_y";
    kolo_handle_t h = nullptr;
    if (rank == odd)
      EXPECT_EQ(kolo_allreduce_async(name.c_str(), v.data(), v.data(), 4, KOLO_INT32, KOLO_OP_SUM,
                                     1.0, 1.0, cpu(), &h),
                KOLO_OK);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank != odd)
      EXPECT_EQ(kolo_allreduce_async(name.c_str(), v.data(), v.data(), 4, KOLO_INT32, KOLO_OP_SUM,
                                     1.0, 1.0, cpu(), &h),
                KOLO_OK);
    EXPECT_EQ(kolo_wait(h, 120.0), KOLO_ERR_STALLED) << kolo_handle_message(h);
    kolo_handle_release(h);
    log = capture.stop();
  }
  if (rank == 0) {
    EXPECT_TRUE(has(log, std::to_string(odd) + ": [grad_y]")) << log;
    // "rank 1 submitted instead [grad_x] and has been idle for 1.0 s since its last submission"
    const std::regex instead("rank " + std::to_string(odd) +
                             " submitted instead \\[grad_x\\] and has been idle for ([0-9.]+) s "
                             "since its last submission");
    std::smatch m;
    ASSERT_TRUE(std::regex_search(log, m, instead)) << log;
    EXPECT_GE(std::stod(m[1]), 0.4) << log;  // it has submitted nothing since grad_x (>= 0.5 s)
    EXPECT_LT(std::stod(m[1]), 60.0) << log;
  }
  EXPECT_TRUE(
      has(log, "flight recorder (stall): wrote the last 6 operations to " + dump_path(dir, rank)))
      << log;
  const std::string dump = read_file(dump_path(dir, rank));
  EXPECT_TRUE(has(dump, "\"rank\": " + std::to_string(rank) +
                            ", \"size\": " + std::to_string(size) + ", \"reason\": \"stall\""))
      << dump;
  EXPECT_TRUE(has(
      dump, std::string("{\"seq\": 6, \"name\": \"") + (rank == odd ? "grad_x" : "grad_y") + "\""))
      << dump;
  common_steps(2);  // the job goes on
  EXPECT_EQ(kolo_shutdown(), KOLO_OK);
  for (const char* v : {"KOLO_FLIGHT_RECORDER_DIR", "KOLO_FLIGHT_RECORDER",
                        "KOLO_STALL_CHECK_TIME_SECONDS", "KOLO_STALL_SHUTDOWN_TIME_SECONDS"})
    unsetenv(v);
}

TEST(HangDiagnosis, SigusrOneDumpsThisRankAndTheJobGoesOn) {
  const int rank = world_rank();
  const std::string dir = dump_dir("sigusr1");
  const std::string path = dump_path(dir, rank);
  std::remove(path.c_str());
  setenv("KOLO_FLIGHT_RECORDER_DIR", dir.c_str(), 1);
  MPI_Barrier(MPI_COMM_WORLD);
  ASSERT_EQ(kolo_init(), KOLO_OK) << kolo_last_error();
  common_steps(3);
  ASSERT_EQ(kill(getpid(), SIGUSR1), 0);  // as `kill -USR1 <pid>` would
  std::string dump;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!has(dump, "step/2") && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    dump = read_file(path);
  }
  EXPECT_TRUE(has(dump, "\"reason\": \"SIGUSR1\"")) << dump;
  EXPECT_TRUE(has(dump, "\"recorded\": 3")) << dump;
  common_steps(2);
  EXPECT_EQ(kolo_shutdown(), KOLO_OK);
  unsetenv("KOLO_FLIGHT_RECORDER_DIR");
}

}  // namespace
}  // namespace kolo_test
