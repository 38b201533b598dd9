// kolo_timeline_start / kolo_timeline_stop under mpiexec -n 2, 3, 4: the errors a
// caller can cause (before init, start twice, stop without start, a NULL, empty
// or unopenable path) are clear and local; a started timeline records while
// tensors flow and its file is complete JSON once stopped. (The files' content
// is checked with Python's JSON parser in tests/python/test_timeline.py.)
#include <unistd.h>

#include <cstdio>
#include <string>

#include "api_fixture.h"

namespace kolo_test {
namespace {

const ::testing::Environment* const kMpi = ::testing::AddGlobalTestEnvironment(new MpiEnvironment);

TEST(TimelineApi, BeforeInitIsNotInitialized) {
  EXPECT_EQ(kolo_timeline_start("/tmp/x-%r.json", 0), KOLO_ERR_NOT_INITIALIZED);
  EXPECT_EQ(kolo_timeline_stop(), KOLO_ERR_NOT_INITIALIZED);
}

class TimelineApiTest : public KoloTest {};

TEST_F(TimelineApiTest, ErrorsAreClearAndLocal) {
  EXPECT_EQ(kolo_timeline_stop(), KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kolo_last_error()).find("kolo_timeline_stop: the timeline is not started"),
            std::string::npos)
      << kolo_last_error();
  EXPECT_EQ(kolo_timeline_start(nullptr, 0), KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kolo_last_error()).find("path is NULL"), std::string::npos);
  EXPECT_EQ(kolo_timeline_start("", 0), KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kolo_timeline_start("/nonexistent-dir/t-%r.json", 0), KOLO_ERR_INVALID_ARGUMENT);
  const std::string bad = "/nonexistent-dir/t-" + std::to_string(rank_) + ".json";
  EXPECT_NE(std::string(kolo_last_error()).find("cannot open '" + bad + "'"), std::string::npos)
      << kolo_last_error();
  // A failed start leaves it stopped.
  EXPECT_EQ(kolo_timeline_stop(), KOLO_ERR_INVALID_ARGUMENT);
  // No rank shuts down (TearDown) before every rank's checks: a peer's shutdown
  // stops kolo here too, and a start is then refused as KOLO_ERR_SHUTDOWN.
  world_barrier();
}

TEST_F(TimelineApiTest, StartTwiceFailsAndStopCompletesTheFile) {
  const std::string pattern =
      "/tmp/kolo-timeline-api-" + std::to_string(getppid()) + "-%r.json";
  const std::string mine = "/tmp/kolo-timeline-api-" + std::to_string(getppid()) + "-" +
                           std::to_string(rank_) + ".json";
  ASSERT_EQ(kolo_timeline_start(pattern.c_str(), 1), KOLO_OK) << kolo_last_error();
  EXPECT_EQ(kolo_timeline_start(pattern.c_str(), 0), KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kolo_last_error()).find("already started"), std::string::npos)
      << kolo_last_error();
  int32_t in[4] = {rank_, rank_, rank_, rank_}, out[4] = {};
  ASSERT_EQ(allreduce("tl.x", in, out, 4, KOLO_INT32, KOLO_OP_SUM), KOLO_OK);
  EXPECT_EQ(out[0], size_ * (size_ - 1) / 2);
  ASSERT_EQ(kolo_timeline_stop(), KOLO_OK) << kolo_last_error();
  const std::string text = read_file(mine);
  std::remove(mine.c_str());
  ASSERT_GE(text.size(), 3u);
  EXPECT_EQ(text.front(), '[');
  EXPECT_EQ(text.substr(text.size() - 3), "\n]\n");
  EXPECT_NE(text.find("\"tensor\": \"tl.x\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"name\": \"CYCLE\""), std::string::npos) << text;
  EXPECT_EQ(kolo_timeline_stop(), KOLO_ERR_INVALID_ARGUMENT);
}

}  // namespace
}  // namespace kolo_test
