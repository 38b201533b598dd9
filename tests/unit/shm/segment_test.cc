// The node's segment and what a killed job leaves behind (transports/shm/
// segment.h, Note [A segment outlives no job]): a segment whose creator has
// exited is reclaimed, by the sweep and by a create() that finds it in the
// way; one whose creator runs is never reused (create() refuses, naming it);
// open() refuses a segment that is not the one it was told of. Processes are
// real (fork), since the verdicts turn on whether a pid is alive.
#include "transports/shm/segment.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>

namespace kolo::shm {
namespace {

// A name no other test (or job) uses.
std::string fresh_name() {
  std::random_device device;
  return Segment::name((uint64_t{device()} << 32) ^ device(), 7);
}

bool exists(const std::string& name) {
  struct stat st;
  return stat(("/dev/shm" + name).c_str(), &st) == 0;
}

SegmentHeader header_of(uint64_t token, size_t bytes) {
  SegmentHeader h;
  h.token = token;
  h.bytes = bytes;
  h.node = 7;
  h.local_size = 2;
  return h;
}

// A child that creates `name` and is killed (SIGKILL) before it can unlink it,
// as a job killed during Node::create: what it leaves, with its pid.
pid_t leave_segment_of_killed_process(const std::string& name) {
  int ready[2];
  EXPECT_EQ(pipe(ready), 0);
  const pid_t child = fork();
  if (child == 0) {
    std::unique_ptr<Segment> s;
    const bool made = Segment::create(name, header_of(1, 8192), &s).ok();
    char byte = made ? 1 : 0;
    if (write(ready[1], &byte, 1) != 1) _exit(2);
    for (;;) pause();  // killed here, the name still there
  }
  char byte = 0;
  EXPECT_EQ(read(ready[0], &byte, 1), 1);
  EXPECT_EQ(byte, 1) << "the child could not create the segment";
  kill(child, SIGKILL);
  int status = 0;
  EXPECT_EQ(waitpid(child, &status, 0), child);  // reaped: the pid is gone
  close(ready[0]);
  close(ready[1]);
  return child;
}

TEST(Segment, CreateOpenAndUnlink) {
  const std::string name = fresh_name();
  std::unique_ptr<Segment> made, opened;
  SegmentHeader h = header_of(42, 3 * 4096);
  ASSERT_TRUE(Segment::create(name, h, &made).ok());
  EXPECT_TRUE(exists(name));
  std::strcpy(made->base() + 4096, "kolo");
  h.creator_pid = static_cast<int32_t>(getpid());
  Status s = Segment::open(name, h, &opened);
  ASSERT_TRUE(s.ok()) << s.to_string();
  EXPECT_STREQ(opened->base() + 4096, "kolo");  // the same memory
  ASSERT_TRUE(made->unlink().ok());
  EXPECT_FALSE(exists(name));
  std::strcpy(opened->base() + 4096, "node");  // mappings outlive the name
  EXPECT_STREQ(made->base() + 4096, "node");
}

// A segment that is not the one the creator announced is refused.
TEST(Segment, OpenRefusesAnotherJobsSegment) {
  const std::string name = fresh_name();
  std::unique_ptr<Segment> made, opened;
  SegmentHeader h = header_of(42, 4096 * 2);
  ASSERT_TRUE(Segment::create(name, h, &made).ok());
  h.creator_pid = static_cast<int32_t>(getpid());
  SegmentHeader other = h;
  other.token = 43;
  Status s = Segment::open(name, other, &opened);
  EXPECT_EQ(s.code(), Code::kTransport);
  EXPECT_NE(s.message().find("refusing"), std::string::npos) << s.message();
  other = h;
  other.creator_pid = h.creator_pid + 1;
  EXPECT_FALSE(Segment::open(name, other, &opened).ok());
  EXPECT_FALSE(Segment::open(fresh_name(), h, &opened).ok()) << "no such segment";
}

// A killed creator's segment is in the way of the next create() of its name:
// reclaimed (removed and made afresh), and the new one is this process's.
TEST(Segment, ASegmentLeftByAKilledProcessIsReclaimed) {
  const std::string name = fresh_name();
  const pid_t dead = leave_segment_of_killed_process(name);
  ASSERT_TRUE(exists(name)) << "the killed process left nothing to reclaim";
  std::unique_ptr<Segment> made;
  Status s = Segment::create(name, header_of(2, 4096 * 2), &made);
  ASSERT_TRUE(s.ok()) << s.to_string() << " (the dead creator was pid " << dead << ")";
  std::unique_ptr<Segment> opened;
  SegmentHeader mine = header_of(2, 4096 * 2);
  mine.creator_pid = static_cast<int32_t>(getpid());
  EXPECT_TRUE(Segment::open(name, mine, &opened).ok()) << "not the new segment";
}

// The sweep at every create(): another name a killed job left goes too.
TEST(Segment, EveryCreateSweepsWhatKilledJobsLeft) {
  const std::string left = fresh_name();
  leave_segment_of_killed_process(left);
  ASSERT_TRUE(exists(left));
  std::unique_ptr<Segment> made;
  ASSERT_TRUE(Segment::create(fresh_name(), header_of(3, 4096), &made).ok());
  EXPECT_FALSE(exists(left)) << "a dead job's segment survived the sweep";
}

// A segment whose creator runs is never reused: create() of its name fails,
// naming the running creator, and leaves the segment as it was; the sweep
// leaves it alone too.
TEST(Segment, ALiveProcessesSegmentIsNeverReused) {
  const std::string name = fresh_name();
  int ready[2], done[2];
  ASSERT_EQ(pipe(ready), 0);
  ASSERT_EQ(pipe(done), 0);
  const pid_t child = fork();
  if (child == 0) {
    std::unique_ptr<Segment> s;
    if (!Segment::create(name, header_of(9, 8192), &s).ok()) _exit(2);
    std::strcpy(s->base() + 4096, "theirs");
    char byte = 1;
    if (write(ready[1], &byte, 1) != 1) _exit(2);
    if (read(done[0], &byte, 1) != 1) _exit(2);  // alive until the parent is done
    const bool untouched = std::strcmp(s->base() + 4096, "theirs") == 0;
    s.reset();
    _exit(untouched ? 0 : 3);
  }
  char byte = 0;
  ASSERT_EQ(read(ready[0], &byte, 1), 1);
  reclaim_stale_segments();
  EXPECT_TRUE(exists(name)) << "the sweep removed a running process's segment";
  std::unique_ptr<Segment> mine;
  Status s = Segment::create(name, header_of(10, 8192), &mine);
  EXPECT_EQ(s.code(), Code::kTransport);
  EXPECT_NE(s.message().find("process " + std::to_string(child) + ", which is running"),
            std::string::npos)
      << s.message();
  EXPECT_TRUE(exists(name));
  ASSERT_EQ(write(done[1], &byte, 1), 1);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the live segment was touched";
  EXPECT_FALSE(exists(name)) << "its creator's Segment unlinks on the way out";
  for (int fd : {ready[0], ready[1], done[0], done[1]}) close(fd);
}

// More than /dev/shm holds: reserving it is an error that says so, not a SIGBUS
// when the pages are first touched.
TEST(Segment, ReservingMoreThanDevShmHoldsIsAClearError) {
  struct statvfs fs;
  ASSERT_EQ(statvfs("/dev/shm", &fs), 0);
  const size_t too_much = (static_cast<size_t>(fs.f_blocks) * fs.f_frsize + (size_t{1} << 30)) /
                          4096 * 4096;
  std::unique_ptr<Segment> made;
  Status s = Segment::create(fresh_name(), header_of(5, too_much), &made);
  ASSERT_TRUE(s.ok()) << s.to_string();  // a sparse object: no memory yet
  s = made->reserve(0, too_much);
  EXPECT_EQ(s.code(), Code::kTransport);
  EXPECT_NE(s.message().find("is /dev/shm full?"), std::string::npos) << s.message();
  EXPECT_TRUE(made->reserve(0, 4096).ok());
}

}  // namespace
}  // namespace kolo::shm
