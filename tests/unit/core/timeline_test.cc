// The timeline: which rank writes which file, start/stop at run time and their
// errors, and who came last to a name — on the slow path and the response
// cache's fast path — with ranks as threads over the loopback transport.
// (tests/multirank/timeline checks the merged files with Python's JSON parser.)
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "core/straggler.h"
#include "core/timeline.h"
#include "loopback_job.h"
#include "read_file.h"

namespace kolo::core {
namespace {

using testing::LoopbackJob;
using testing::submit;

// How late the straggler submits (see EveryRanksFileNamesTheStragglerOnBothPaths).
constexpr std::chrono::milliseconds kLag(100);

// A path of this process's own under the temporary directory: CTest runs test
// cases side by side, and other builds' runs share the directory.
std::string unique_path(const std::string& name) {
  return ::testing::TempDir() + std::to_string(getpid()) + "." + name;
}
using testing::wait_code;

using kolo_test::read_file;

// Counts the NEGOTIATE events of `name` whose straggler is `rank`.
int negotiations(const std::string& text, const std::string& name, int straggler) {
  const std::string want = "\"tensor\": \"" + name + "\", \"collective\": \"allreduce\", "
                           "\"straggler\": " + std::to_string(straggler) + ",";
  int n = 0;
  for (size_t at = text.find(want); at != std::string::npos; at = text.find(want, at + 1)) ++n;
  return n;
}

TEST(TimelineFiles, PercentRAndDirectoriesAreEveryRanksPlainPathsRankZeros) {
  EXPECT_EQ(timeline_file_for("/tmp/t-%r.json", 3), "/tmp/t-3.json");
  EXPECT_EQ(timeline_file_for("/tmp/%r/t%r.json", 12), "/tmp/12/t12.json");
  EXPECT_EQ(timeline_file_for("/tmp/dir/", 1), "/tmp/dir/kolo-timeline-rank1.json");
  EXPECT_EQ(timeline_file_for(::testing::TempDir(), 2).find("kolo-timeline-rank2.json") !=
                std::string::npos,
            true);
  EXPECT_EQ(timeline_file_for("/tmp/t.json", 0), "/tmp/t.json");
  EXPECT_EQ(timeline_file_for("/tmp/t.json", 1), "");
  EXPECT_EQ(timeline_file_for("", 0), "");
}

TEST(Straggler, SmallestAgeIsLastAndAbsentRanksDoNotCount) {
  // Ages in microseconds, by rank; -1: not submitted (a joined rank).
  std::vector<std::vector<int64_t>> ages = {{500, -1, 7}, {20, -1, 7}, {900, 4, -1}};
  Timeline::Straggler a = straggler_of(ages, 0);
  EXPECT_EQ(a.rank, 1);
  EXPECT_EQ(a.lag_us, 880.0);
  EXPECT_EQ(straggler_of(ages, 1).rank, 2);
  EXPECT_EQ(straggler_of(ages, 1).lag_us, 0.0);
  EXPECT_EQ(straggler_of(ages, 2).rank, 0);  // a tie: the lowest rank
  EXPECT_EQ(straggler_of({{-1}, {-1}}, 0).rank, -1);
}

TEST(Straggler, AgesRoundTripAndBadInputIsAnError) {
  const std::vector<int64_t> ages = {0, -1, 123456789012};
  const std::string bytes = encode_submit_ages(ages);
  std::vector<int64_t> back;
  ASSERT_TRUE(decode_submit_ages(bytes, 3, &back).ok());
  EXPECT_EQ(back, ages);
  for (size_t n = 0; n < bytes.size(); ++n)
    EXPECT_FALSE(decode_submit_ages(bytes.substr(0, n), 3, &back).ok()) << n;
  EXPECT_FALSE(decode_submit_ages(bytes, 2, &back).ok());
  EXPECT_FALSE(decode_submit_ages(bytes + "x", 3, &back).ok());
  std::string wrong = bytes;
  wrong[0] ^= 1;
  EXPECT_FALSE(decode_submit_ages(wrong, 3, &back).ok());
}

TEST(Timeline, StartTwiceStopWithoutStartAndBadPathAreClearErrors) {
  const std::string path = unique_path("kolo_timeline_errors.json");
  LoopbackJob job(2);
  Runtime& rt = job.rank(0);
  Status s = rt.stop_timeline();
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("not started"), std::string::npos) << s.message();
  s = rt.start_timeline("/nonexistent-dir/t.json", false);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("cannot open '/nonexistent-dir/t.json'"), std::string::npos)
      << s.message();
  EXPECT_EQ(rt.start_timeline("", false).code(), Code::kInvalidArgument);
  ASSERT_TRUE(rt.start_timeline(path, true).ok());
  s = rt.start_timeline(path, false);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("already started"), std::string::npos) << s.message();
  // Rank 1 writes nothing for a plain path, and is started all the same.
  ASSERT_TRUE(job.rank(1).start_timeline(path, false).ok());
  EXPECT_EQ(job.rank(1).start_timeline(path, false).code(), Code::kInvalidArgument);
  EXPECT_TRUE(job.rank(1).stop_timeline().ok());
  EXPECT_TRUE(rt.stop_timeline().ok());
  EXPECT_EQ(rt.stop_timeline().code(), Code::kInvalidArgument);
  const std::string text = read_file(path);
  EXPECT_EQ(text.substr(0, 1), "[");
  EXPECT_EQ(text.substr(text.size() - 3), "\n]\n");
  // Started again, the file starts again.
  ASSERT_TRUE(rt.start_timeline(path, false).ok());
  EXPECT_TRUE(rt.stop_timeline().ok());
  job.shutdown();
  EXPECT_EQ(rt.start_timeline(path, false).code(), Code::kShutdown);
}

// Rank 2 submits each name once the others have (and 100 ms later): every rank's
// file names it as the straggler, on the slow path (step 0) and from the
// response cache (step 1). Note [Who came last]: each rank's age of a name is
// read by its own coordinator once the name is ready, so the lag must outlast
// the skew between the coordinators' clock reads, which a loaded machine under
// TSan stretches to milliseconds (5 ms was too little).
TEST(Timeline, EveryRanksFileNamesTheStragglerOnBothPaths) {
  const std::string pattern = unique_path("kolo_timeline_straggler_%r.json");
  LoopbackJob job(3);
  job.run([&](int rank, Runtime& rt) { ASSERT_TRUE(rt.start_timeline(pattern, false).ok()); });
  for (int step = 0; step < 2; ++step) {
    std::atomic<int> submitted{0};
    job.run([&](int rank, Runtime& rt) {
      if (rank == 2) {
        while (submitted.load() < 2) std::this_thread::yield();
        std::this_thread::sleep_for(kLag);
      }
      std::vector<float> in(64, 1.0f), out(64);
      auto h = submit(rt, "grad/w", in.data(), out.data(), 64, DataType::kFloat32);
      ++submitted;
      ASSERT_EQ(wait_code(h), Code::kOk) << h->message();
      ASSERT_EQ(out[0], 3.0f);
    });
  }
  job.run([&](int rank, Runtime& rt) { ASSERT_TRUE(rt.stop_timeline().ok()); });
  for (int r = 0; r < 3; ++r) {
    const std::string text = read_file(timeline_file_for(pattern, r));
    SCOPED_TRACE("rank " + std::to_string(r) + "\n" + text);
    EXPECT_EQ(negotiations(text, "grad/w", 2), 2);
    EXPECT_NE(text.find("\"name\": \"rank " + std::to_string(r) + "\""), std::string::npos);
    EXPECT_NE(text.find("\"pid\": " + std::to_string(r)), std::string::npos);
    EXPECT_NE(text.find("\"transport\": \"loopback\""), std::string::npos);
    EXPECT_NE(text.find("\"bytes\": 256"), std::string::npos);
    EXPECT_NE(text.find("kolo_clock"), std::string::npos);
  }
}

// Only rank 1 records; the others take part in the exchange all the same, and a
// cycle is marked when asked.
TEST(Timeline, OneRankRecordingAloneMarksCycles) {
  const std::string dir = unique_path("kolo_timeline_one_rank/");
  std::remove((dir + "kolo-timeline-rank1.json").c_str());
  ASSERT_EQ(system(("mkdir -p " + dir).c_str()), 0);
  LoopbackJob job(2);
  ASSERT_TRUE(job.rank(1).start_timeline(dir, true).ok());
  std::atomic<bool> first{false};
  job.run([&](int rank, Runtime& rt) {
    if (rank == 1) {
      while (!first.load()) std::this_thread::yield();
      std::this_thread::sleep_for(kLag);
    }
    std::vector<int32_t> in(5, rank), out(5);
    auto h = submit(rt, "counts", in.data(), out.data(), 5, DataType::kInt32);
    first = true;
    ASSERT_EQ(wait_code(h), Code::kOk) << h->message();
  });
  job.shutdown();  // kolo's stop completes the file
  const std::string text = read_file(dir + "kolo-timeline-rank1.json");
  EXPECT_EQ(text.substr(text.size() - 3), "\n]\n") << text;
  EXPECT_NE(text.find("\"straggler\": 1,"), std::string::npos) << text;
  EXPECT_NE(text.find("\"name\": \"CYCLE\""), std::string::npos) << text;
  EXPECT_EQ(read_file(dir + "kolo-timeline-rank0.json"), "");
}

}  // namespace
}  // namespace kolo::core
