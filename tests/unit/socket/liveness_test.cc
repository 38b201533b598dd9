// Liveness from the sockets (Note [Liveness from the sockets] in
// transports/socket/engine.h): a killed peer is seen at once, a stopped one
// after the peer timeout, a verdict reaches every rank and stays; a busy rank
// or an orderly leave is no failure. Ranks are forked processes where a rank
// must die or stop, threads otherwise; where ranks are forked, the store is
// served from a process of its own (testing::StoreIn).
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "tests/unit/socket/socket_job.h"
#include "transports/socket/socket_control_plane.h"

namespace kolo::socket {
namespace {

using testing::SocketJob;
using testing::StoreIn;
using std::chrono::milliseconds;

int64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

// A rank in a process of its own, reporting lines through a pipe; killed and
// reaped when the test ends, however it ends.
struct Forked {
  Forked() = default;
  Forked(Forked&& o) noexcept : pid(o.pid), from(o.from), buffer(std::move(o.buffer)) { o.pid = -1; }
  ~Forked() { reap(); }
  pid_t pid = -1;
  int from = -1;  // the read end of its pipe
  std::string buffer;

  // The next line it writes, or "" after `limit`.
  std::string line(milliseconds limit) {
    const int64_t end = now_ns() + limit.count() * 1000000;
    while (true) {
      const size_t nl = buffer.find('\n');
      if (nl != std::string::npos) {
        std::string l = buffer.substr(0, nl);
        buffer.erase(0, nl + 1);
        return l;
      }
      const int64_t left = (end - now_ns()) / 1000000;
      if (left <= 0) return "";
      pollfd p{from, POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(left)) <= 0) continue;
      char chunk[512];
      const ssize_t n = read(from, chunk, sizeof chunk);
      if (n <= 0) return "";
      buffer.append(chunk, static_cast<size_t>(n));
    }
  }
  void reap() {
    if (pid <= 0) return;
    kill(pid, SIGKILL);
    kill(pid, SIGCONT);
    waitpid(pid, nullptr, 0);
    close(from);
    pid = -1;
  }
};

void say(int fd, const std::string& text) {
  const std::string l = text + "\n";
  if (write(fd, l.data(), l.size()) < 0) _exit(3);
}

// Forks rank `rank`, which creates its world, says "ready" after a barrier, then
// runs `body` (which says what it saw) and exits.
Forked fork_rank(const SocketJob& job, int rank, int size, milliseconds peer_timeout,
                 const std::function<void(transport::World&, int fd)>& body) {
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  Forked f;
  f.pid = fork();
  if (f.pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the test
    close(fds[0]);
    SocketWorldOptions o = job.options(rank, size);
    o.peer_timeout = peer_timeout;
    transport::World world;
    Status s = create_world(o, &world);
    if (s.ok()) s = world.control->barrier();
    if (!s.ok()) {
      say(fds[1], "error " + s.to_string());
      _exit(1);
    }
    say(fds[1], "ready");
    body(world, fds[1]);
    _exit(0);
  }
  close(fds[1]);
  f.from = fds[0];
  return f;
}

// Waits for a failure on every call a rank can make, and says when it came and what it said.
void report_failure(transport::World& w, int fd, int peer) {
  uint64_t v = 0;
  transport::RequestId id;
  Status s = w.p2p->irecv(peer, &v, 8, 1, &id);
  if (s.ok()) s = w.p2p->wait(id);
  const int64_t at = now_ns();
  say(fd, "failed " + std::to_string(at) + " " + code_name(s.code()) + " " + s.message());
  // For good: every later call fails alike.
  std::vector<transport::Bytes> all;
  const bool for_good = w.control->check_peers().code() == Code::kRankFailed &&
                        w.control->barrier().code() == Code::kRankFailed &&
                        w.control->allgather("x", &all).code() == Code::kRankFailed &&
                        w.p2p->isend(peer, &v, 8, 1, &id).code() == Code::kRankFailed;
  say(fd, for_good ? "for good" : "not for good");
}

TEST(SocketLiveness, AKilledPeerIsSeenAtOnce) {
  SocketJob job(StoreIn::kProcess);
  Forked zero = fork_rank(job, 0, 2, milliseconds(10000), [](transport::World& w, int fd) {
    report_failure(w, fd, 1);
  });
  Forked one = fork_rank(job, 1, 2, milliseconds(10000), [](transport::World&, int) { pause(); });
  ASSERT_EQ(zero.line(milliseconds(20000)), "ready");
  ASSERT_EQ(one.line(milliseconds(20000)), "ready");
  std::this_thread::sleep_for(milliseconds(100));  // rank 0 waits in its receive
  const int64_t killed = now_ns();
  kill(one.pid, SIGKILL);
  const std::string failed = zero.line(milliseconds(5000));
  ASSERT_EQ(failed.rfind("failed ", 0), 0u) << failed;
  const int64_t seen = std::stoll(failed.substr(7));
  EXPECT_LT(seen - killed, 1000000000) << "noticed after " << (seen - killed) / 1e6 << " ms";
  EXPECT_NE(failed.find("KOLO_ERR_RANK_FAILED"), std::string::npos) << failed;
  EXPECT_NE(failed.find("rank 1"), std::string::npos) << failed;
  EXPECT_NE(failed.find("closed its connection"), std::string::npos) << failed;
  EXPECT_EQ(zero.line(milliseconds(5000)), "for good");
  zero.reap();
  one.reap();
}

// On one host the coordinator sleeps on the node layer's doorbell (a futex), not
// on the engine: a killed host peer must still wake it at once (Note [One sleep
// for both doorbells] in socket_control_plane.h), and the node's board joins
// the verdict's names.
TEST(SocketLiveness, AKilledHostPeerWakesASleeperOnTheNodeDoorbell) {
  SocketJob job(StoreIn::kProcess);
  Forked zero = fork_rank(job, 0, 2, milliseconds(10000), [](transport::World& w, int fd) {
    const bool on_node = w.control->carry_capacity(4) > 0;  // the node layer is in use
    say(fd, on_node ? "on node" : "no node layer");
    w.control->wait_for_ring(1, std::chrono::seconds(30), std::chrono::seconds(30));
    const int64_t at = now_ns();
    Status s = w.control->check_peers();
    say(fd, "failed " + std::to_string(at) + " " + code_name(s.code()) + " " + s.message());
  });
  Forked one = fork_rank(job, 1, 2, milliseconds(10000), [](transport::World&, int) { pause(); });
  ASSERT_EQ(zero.line(milliseconds(20000)), "ready");
  ASSERT_EQ(one.line(milliseconds(20000)), "ready");
  ASSERT_EQ(zero.line(milliseconds(5000)), "on node");
  std::this_thread::sleep_for(milliseconds(200));  // rank 0 sleeps on the futex
  const int64_t killed = now_ns();
  kill(one.pid, SIGKILL);
  const std::string failed = zero.line(milliseconds(5000));
  ASSERT_EQ(failed.rfind("failed ", 0), 0u) << failed;
  const int64_t seen = std::stoll(failed.substr(7));
  EXPECT_LT(seen - killed, 500000000) << "noticed after " << (seen - killed) / 1e6 << " ms";
  EXPECT_NE(failed.find("KOLO_ERR_RANK_FAILED"), std::string::npos) << failed;
  EXPECT_NE(failed.find("rank 1"), std::string::npos) << failed;
  zero.reap();
  one.reap();
}

// A host peer that released its world (bye) and then exited, or stays silent
// for longer than the timeout, left in order: the node's board must not call
// that a failure.
TEST(SocketLiveness, AHostPeerThatLeftInOrderAndExitedIsNoFailure) {
  SocketJob job(StoreIn::kProcess);
  const milliseconds timeout(500);
  Forked zero = fork_rank(job, 0, 2, timeout, [&](transport::World& w, int fd) {
    std::this_thread::sleep_for(timeout * 3);  // rank 1 leaves, exits; its beats stop
    for (int i = 0; i < 20; ++i) {
      Status s = w.control->check_peers();
      if (!s.ok()) {
        say(fd, "failed " + s.message());
        return;
      }
      std::this_thread::sleep_for(milliseconds(20));
    }
    say(fd, "still fine");
  });
  Forked one = fork_rank(job, 1, 2, timeout, [](transport::World& w, int) {
    w.release_transports();
  });
  ASSERT_EQ(zero.line(milliseconds(20000)), "ready");
  ASSERT_EQ(one.line(milliseconds(20000)), "ready");
  EXPECT_EQ(zero.line(milliseconds(10000)), "still fine");
  zero.reap();
  one.reap();
}

TEST(SocketLiveness, AStoppedPeerFailsAfterTheTimeoutAndStaysFailedWhenItResumes) {
  SocketJob job(StoreIn::kProcess);
  const milliseconds timeout(1000);
  Forked zero = fork_rank(job, 0, 2, timeout, [](transport::World& w, int fd) {
    report_failure(w, fd, 1);
    std::this_thread::sleep_for(milliseconds(1500));  // hold the world while rank 1 resumes
  });
  Forked one = fork_rank(job, 1, 2, timeout, [](transport::World& w, int fd) {
    while (w.control->check_peers().ok()) std::this_thread::sleep_for(milliseconds(10));
    say(fd, "resumed and failed: " + w.control->check_peers().message());
  });
  ASSERT_EQ(zero.line(milliseconds(20000)), "ready");
  ASSERT_EQ(one.line(milliseconds(20000)), "ready");
  const int64_t stopped = now_ns();
  kill(one.pid, SIGSTOP);
  const std::string failed = zero.line(milliseconds(6000));
  ASSERT_EQ(failed.rfind("failed ", 0), 0u) << failed;
  const double after = (std::stoll(failed.substr(7)) - stopped) / 1e9;
  EXPECT_GE(after, 0.9) << failed;
  EXPECT_LE(after, 1.0 + 2.0) << failed;  // issue 32: within the timeout + 2 s
  EXPECT_NE(failed.find("rank 1"), std::string::npos) << failed;
  EXPECT_NE(failed.find("has not been heard from"), std::string::npos) << failed;
  EXPECT_EQ(zero.line(milliseconds(5000)), "for good");
  kill(one.pid, SIGCONT);
  const std::string resumed = one.line(milliseconds(5000));
  EXPECT_EQ(resumed.rfind("resumed and failed: ", 0), 0u) << resumed;
  zero.reap();
  one.reap();
}

// A verdict one rank reaches goes to the others, with the names in it.
TEST(SocketLiveness, AVerdictReachesEveryRank) {
  SocketJob job;
  job.run_ok(3, [](int r, transport::World& w) {
    ASSERT_TRUE(w.control->barrier().ok());
    const auto start = Clock::now();
    if (r == 0) {
      auto* plane = dynamic_cast<SocketControlPlane*>(w.control.get());
      ASSERT_NE(plane, nullptr);
      plane->engine()->declare_failure("a peer failed: rank 2 (test) went away");
    }
    while (w.control->check_peers().ok() && Clock::now() - start < std::chrono::seconds(5))
      std::this_thread::sleep_for(milliseconds(5));
    Status s = w.control->check_peers();
    EXPECT_EQ(s.code(), Code::kRankFailed) << "rank " << r;
    EXPECT_NE(s.message().find("rank 2 (test) went away"), std::string::npos) << s.message();
    if (r != 0) {
      EXPECT_NE(s.message().find("rank 0 reports"), std::string::npos) << s.message();
    }
    EXPECT_LT(Clock::now() - start, std::chrono::seconds(1));
  });
}

// Heartbeats come from the progress thread: a rank whose threads are all busy
// elsewhere is not silent.
TEST(SocketLiveness, ABusyRankIsNoFailure) {
  SocketJob job;
  job.run(2, [](int, SocketWorldOptions* o) { o->peer_timeout = milliseconds(300); },
          [](int r, const Status& s, transport::World& w) {
            ASSERT_TRUE(s.ok()) << s.to_string();
            ASSERT_TRUE(w.control->barrier().ok());
            const auto until = Clock::now() + milliseconds(1500);
            volatile uint64_t spin = 0;
            if (r == 1) {
              while (Clock::now() < until) spin = spin + 1;
            } else {
              std::this_thread::sleep_until(until);
            }
            EXPECT_TRUE(w.control->check_peers().ok()) << w.control->check_peers().message();
            EXPECT_TRUE(w.control->barrier().ok());
          });
}

// A rank that releases its world says bye first: its peers see no failure, and
// what they ask of it afterwards says it has left.
TEST(SocketLiveness, AnOrderlyLeaveIsNoFailure) {
  SocketJob job;
  job.run_ok(2, [](int r, transport::World& w) {
    ASSERT_TRUE(w.control->barrier().ok());
    if (r == 1) {
      w.release_transports();
      return;
    }
    std::this_thread::sleep_for(milliseconds(300));
    EXPECT_TRUE(w.control->check_peers().ok()) << w.control->check_peers().message();
    uint64_t v;
    transport::RequestId id;
    Status s = w.p2p->irecv(1, &v, 8, 1, &id);
    EXPECT_EQ(s.code(), Code::kShutdown) << s.to_string();
    EXPECT_NE(s.message().find("has left"), std::string::npos) << s.message();
  });
}

}  // namespace
}  // namespace kolo::socket
