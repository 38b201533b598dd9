#include "common/logging.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <string>

namespace kolo::log {
namespace {

// Runs `body` with stderr redirected to a temporary file and returns what it wrote.
template <typename F>
std::string capture_stderr(F body) {
  std::FILE* tmp = std::tmpfile();
  EXPECT_NE(tmp, nullptr);
  const int saved = ::dup(STDERR_FILENO);
  ::dup2(::fileno(tmp), STDERR_FILENO);
  body();
  ::dup2(saved, STDERR_FILENO);
  ::close(saved);
  std::string out;
  std::rewind(tmp);
  for (int c; (c = std::fgetc(tmp)) != EOF;) out.push_back(static_cast<char>(c));
  std::fclose(tmp);
  return out;
}

TEST(LoggingTest, LevelFilterAndPrefix) {
  EXPECT_EQ(level(), LogLevel::kWarning);  // the default
  EXPECT_TRUE(enabled(LogLevel::kError));
  EXPECT_FALSE(enabled(LogLevel::kInfo));
  const std::string before_rank = capture_stderr([] {
    KOLO_LOG(kInfo) << "hidden";
    KOLO_LOG(kWarning) << "bucket " << 3 << " of " << 7;
  });
  EXPECT_EQ(before_rank, "[kolo WARNING rank ?] bucket 3 of 7\n");

  set_rank(2);
  set_level(LogLevel::kDebug);
  const std::string after = capture_stderr([] {
    KOLO_LOG(kTrace) << "hidden";
    KOLO_LOG(kDebug) << "chose mpi";
    KOLO_LOG(kError) << "line already ends\n";
  });
  EXPECT_EQ(after, "[kolo DEBUG rank 2] chose mpi\n[kolo ERROR rank 2] line already ends\n");
  set_level(LogLevel::kWarning);
  set_rank(-1);
}

}  // namespace
}  // namespace kolo::log
