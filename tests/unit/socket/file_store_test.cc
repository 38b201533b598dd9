// The file store (transports/socket/file_store.h): the same operations as the
// TCP store, atomic across processes.
#include "transports/socket/file_store.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <thread>

namespace kolo::socket {
namespace {

using std::chrono::milliseconds;

std::string fresh_directory() {
  char templ[] = "/tmp/kolo-file-store-XXXXXX";
  const char* made = mkdtemp(templ);
  EXPECT_NE(made, nullptr);
  return std::string(made) + "/store";  // created by open()
}

TEST(FileStore, SetGetAddCompareAndDelete) {
  std::unique_ptr<FileStore> s;
  ASSERT_TRUE(FileStore::open(fresh_directory(), milliseconds(1000), &s).ok());
  ASSERT_TRUE(s->set("kolo/g0/rank/1", std::string("a\0b", 3)).ok());
  std::string v;
  ASSERT_TRUE(s->get("kolo/g0/rank/1", milliseconds(100), &v).ok());
  EXPECT_EQ(v, std::string("a\0b", 3));
  int64_t n = 0;
  ASSERT_TRUE(s->add("count", 2, &n).ok());
  ASSERT_TRUE(s->add("count", 3, &n).ok());
  EXPECT_EQ(n, 5);
  std::string now;
  ASSERT_TRUE(s->compare_and_set("cas", "", "x", &now).ok());
  ASSERT_TRUE(s->compare_and_set("cas", "y", "z", &now).ok());
  EXPECT_EQ(now, "x");
  int64_t removed = 0;
  ASSERT_TRUE(s->delete_prefix("kolo/g0/", &removed).ok());
  EXPECT_EQ(removed, 1);
  bool found = true;
  ASSERT_TRUE(s->try_get("kolo/g0/rank/1", &v, &found).ok());
  EXPECT_FALSE(found);
}

TEST(FileStore, WaitSeesAKeySetLaterAndTimesOutNamingTheDirectory) {
  const std::string dir = fresh_directory();
  std::unique_ptr<FileStore> a, b;
  ASSERT_TRUE(FileStore::open(dir, milliseconds(1000), &a).ok());
  ASSERT_TRUE(FileStore::open(dir, milliseconds(1000), &b).ok());
  std::thread later([&] {
    std::this_thread::sleep_for(milliseconds(50));
    EXPECT_TRUE(b->set("late", "1").ok());
  });
  EXPECT_TRUE(a->wait({"late"}, std::chrono::seconds(5)).ok());
  later.join();
  Status s = a->wait({"never"}, milliseconds(100));
  EXPECT_EQ(s.code(), Code::kTimeout);
  EXPECT_NE(s.message().find(dir), std::string::npos) << s.message();
}

TEST(FileStore, AddIsAtomicAcrossProcesses) {
  const std::string dir = fresh_directory();
  std::unique_ptr<FileStore> s;
  ASSERT_TRUE(FileStore::open(dir, milliseconds(5000), &s).ok());
  constexpr int kProcs = 4, kAdds = 50;
  std::vector<pid_t> kids;
  for (int p = 0; p < kProcs; ++p) {
    const pid_t pid = fork();
    if (pid == 0) {
      std::unique_ptr<FileStore> mine;
      if (!FileStore::open(dir, milliseconds(5000), &mine).ok()) _exit(2);
      for (int i = 0; i < kAdds; ++i) {
        int64_t n = 0;
        if (!mine->add("n", 1, &n).ok()) _exit(3);
      }
      _exit(0);
    }
    kids.push_back(pid);
  }
  for (pid_t pid : kids) {
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  int64_t n = 0;
  ASSERT_TRUE(s->add("n", 0, &n).ok());
  EXPECT_EQ(n, kProcs * kAdds);
}

}  // namespace
}  // namespace kolo::socket
