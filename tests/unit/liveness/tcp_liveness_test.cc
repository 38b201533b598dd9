// TcpLiveness (transports/liveness/tcp_liveness.h): ranks as objects in this
// process, or as a forked child where a process must die or stop.
#include "transports/liveness/tcp_liveness.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "transports/liveness/liveness_wire.h"

namespace kolo::liveness {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

TcpLiveness::Options options(int rank, std::chrono::milliseconds timeout, uint64_t token = 42) {
  TcpLiveness::Options o;
  o.rank = rank;
  o.timeout = timeout;
  o.token = token;
  return o;
}

std::vector<TcpLiveness::Peer> others(const std::vector<std::string>& addresses, int me) {
  std::vector<TcpLiveness::Peer> peers;
  for (int r = 0; r < static_cast<int>(addresses.size()); ++r)
    if (r != me) peers.push_back({r, addresses[r]});
  return peers;
}

// n ranks in this process; each connect() runs on its own thread, as on its own rank.
std::vector<Status> connect_all(std::vector<std::unique_ptr<TcpLiveness>>& ranks) {
  std::vector<std::string> addresses;
  for (auto& r : ranks) addresses.push_back(r->address());
  std::vector<Status> results(ranks.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < ranks.size(); ++i)
    threads.emplace_back([&, i] { results[i] = ranks[i]->connect(others(addresses, static_cast<int>(i))); });
  for (auto& t : threads) t.join();
  return results;
}

std::vector<std::unique_ptr<TcpLiveness>> mesh(int n, std::chrono::milliseconds timeout) {
  std::vector<std::unique_ptr<TcpLiveness>> ranks(n);
  for (int r = 0; r < n; ++r) EXPECT_TRUE(TcpLiveness::listen(options(r, timeout), &ranks[r]).ok());
  for (const Status& s : connect_all(ranks)) EXPECT_TRUE(s.ok()) << s.to_string();
  return ranks;
}

// Polls check() until it fails or `limit` passes; returns when it failed (or limit).
Clock::duration until_failed(TcpLiveness& l, Clock::duration limit) {
  const auto start = Clock::now();
  while (l.check().ok() && Clock::now() - start < limit) std::this_thread::sleep_for(1ms);
  return Clock::now() - start;
}

double ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

TEST(TcpLiveness, AMeshStaysAliveWellPastTheTimeout) {
  auto ranks = mesh(3, 300ms);
  std::this_thread::sleep_for(1200ms);
  for (auto& r : ranks) {
    EXPECT_TRUE(r->check().ok()) << r->check().to_string();
    EXPECT_FALSE(r->failed());
  }
}

TEST(TcpLiveness, AGoodbyeIsNotAFailure) {
  auto ranks = mesh(3, 300ms);
  ranks[2].reset();  // its world torn down in order: Bye, then closed
  std::this_thread::sleep_for(900ms);
  EXPECT_TRUE(ranks[0]->check().ok()) << ranks[0]->check().to_string();
  EXPECT_TRUE(ranks[1]->check().ok()) << ranks[1]->check().to_string();
}

TEST(TcpLiveness, AVerdictReachesEveryPeerAndIsFinal) {
  auto ranks = mesh(3, 2000ms);
  ranks[1]->declare(Status(Code::kRankFailed, "rank 5 (pid 99 on this node) has exited"));
  for (int r : {0, 2}) {
    EXPECT_LT(ms(until_failed(*ranks[r], 1s)), 500) << "rank " << r;
    const Status s = ranks[r]->check();
    EXPECT_EQ(s.code(), Code::kRankFailed);
    EXPECT_NE(s.message().find("rank 1 (on host"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("reports: rank 5 (pid 99"), std::string::npos) << s.message();
    EXPECT_EQ(ranks[r]->check().message(), s.message());  // for good
  }
  EXPECT_EQ(ranks[1]->check().message(), "rank 5 (pid 99 on this node) has exited");
}

TEST(TcpLiveness, AWrongTokenIsNoPeer) {
  std::vector<std::unique_ptr<TcpLiveness>> ranks(2);
  ASSERT_TRUE(TcpLiveness::listen(options(0, 300ms, 1), &ranks[0]).ok());
  ASSERT_TRUE(TcpLiveness::listen(options(1, 300ms, 2), &ranks[1]).ok());
  for (const Status& s : connect_all(ranks)) {
    EXPECT_EQ(s.code(), Code::kRankFailed);
    EXPECT_NE(s.message().find("could not open kolo's liveness connections to rank"),
              std::string::npos) << s.message();
  }
}

TEST(TcpLiveness, GarbageOnThePortIsDroppedAndTheMeshStillForms) {
  std::vector<std::unique_ptr<TcpLiveness>> ranks(2);
  for (int r = 0; r < 2; ++r) ASSERT_TRUE(TcpLiveness::listen(options(r, 1000ms), &ranks[r]).ok());
  std::string host, why;
  uint16_t port = 0;
  std::vector<std::string> ipv4;
  ASSERT_TRUE(parse_address(ranks[1]->address(), &host, &port, &ipv4, &why)) << why;
  const int stranger = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(port);
  inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
  ASSERT_EQ(connect(stranger, reinterpret_cast<sockaddr*>(&to), sizeof to), 0);
  const std::string junk = "GET / HTTP/1.1\r\nHost: x\r\n\r\n" + std::string(5000, 'z');
  ASSERT_GT(send(stranger, junk.data(), junk.size(), MSG_NOSIGNAL), 0);
  for (const Status& s : connect_all(ranks)) EXPECT_TRUE(s.ok()) << s.to_string();
  char byte;
  EXPECT_LE(recv(stranger, &byte, 1, 0), 0);  // closed unanswered
  close(stranger);
  std::this_thread::sleep_for(300ms);
  EXPECT_TRUE(ranks[0]->check().ok());
}

// Rank 0 here, rank 1 in a forked child; `child` runs there after connect().
struct Pair {
  std::unique_ptr<TcpLiveness> mine;
  pid_t pid = -1;
  int report = -1;  // the child's pipe: what it has to say
};

template <typename Child>
Pair fork_pair(std::chrono::milliseconds timeout, Child child) {
  Pair pair;
  EXPECT_TRUE(TcpLiveness::listen(options(0, timeout), &pair.mine).ok());
  int down[2], up[2], report[2];
  EXPECT_EQ(pipe(down), 0);
  EXPECT_EQ(pipe(up), 0);
  EXPECT_EQ(pipe(report), 0);
  pair.pid = fork();
  if (pair.pid == 0) {
    std::unique_ptr<TcpLiveness> l;
    if (!TcpLiveness::listen(options(1, timeout), &l).ok()) _exit(2);
    const std::string mine = l->address() + "\n";
    if (write(up[1], mine.data(), mine.size()) < 0) _exit(2);
    char text[1024] = {};
    if (read(down[0], text, sizeof text - 1) <= 0) _exit(2);
    if (!l->connect({{0, std::string(text, strcspn(text, "\n"))}}).ok()) _exit(3);
    const std::string said = child(*l);
    if (write(report[1], said.data(), said.size()) < 0) _exit(2);
    _exit(0);  // no destructor: no goodbye
  }
  const std::string mine = pair.mine->address() + "\n";
  EXPECT_GT(write(down[1], mine.data(), mine.size()), 0);
  char text[1024] = {};
  EXPECT_GT(read(up[0], text, sizeof text - 1), 0);
  EXPECT_TRUE(pair.mine->connect({{1, std::string(text, strcspn(text, "\n"))}}).ok());
  for (int fd : {down[0], down[1], up[0], up[1], report[1]}) close(fd);
  pair.report = report[0];
  return pair;
}

std::string read_all(int fd) {
  std::string out;
  char buffer[512];
  for (ssize_t n; (n = read(fd, buffer, sizeof buffer)) > 0;) out.append(buffer, n);
  close(fd);
  return out;
}

TEST(TcpLiveness, AProcessThatExitsIsNoticedWithinASecondNotAfterTheTimeout) {
  Pair pair = fork_pair(10000ms, [](TcpLiveness&) {
    std::this_thread::sleep_for(300ms);
    return std::string("bye");
  });
  int status = 0;
  ASSERT_EQ(waitpid(pair.pid, &status, 0), pair.pid);
  const auto noticed = until_failed(*pair.mine, 5s);
  EXPECT_LT(ms(noticed), 1000);
  const Status s = pair.mine->check();
  EXPECT_EQ(s.code(), Code::kRankFailed);
  EXPECT_NE(s.message().find("rank 1 (on host"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("has exited"), std::string::npos) << s.message();
  EXPECT_EQ(read_all(pair.report), "bye");
}

TEST(TcpLiveness, AStoppedPeerIsFailedAfterTheTimeoutAndLearnsItWhenResumed) {
  // The child checks until it has a verdict and reports it.
  Pair pair = fork_pair(400ms, [](TcpLiveness& l) {
    const auto start = Clock::now();
    while (l.check().ok() && Clock::now() - start < 10s) std::this_thread::sleep_for(2ms);
    return l.check().message();
  });
  std::this_thread::sleep_for(100ms);
  kill(pair.pid, SIGSTOP);
  const auto silent = until_failed(*pair.mine, 5s);
  EXPECT_GT(ms(silent), 300);  // the timeout, less the beat that was already old
  EXPECT_LT(ms(silent), 900);
  EXPECT_NE(pair.mine->check().message().find("has not been heard from"), std::string::npos)
      << pair.mine->check().message();
  std::this_thread::sleep_for(300ms);  // stopped well past the timeout
  kill(pair.pid, SIGCONT);
  const std::string said = read_all(pair.report);
  int status = 0;
  waitpid(pair.pid, &status, 0);
  // Not its own silence verdict (it was away itself), but rank 0's notice.
  EXPECT_NE(said.find("rank 0 (on host"), std::string::npos) << said;
  EXPECT_NE(said.find("reports: a peer failed: rank 1"), std::string::npos) << said;
}

// Two ranks in two children, stopped together past the timeout and resumed one
// after the other (a paused host): neither may blame the other for the time both
// were away. Each reports what its checks said in the 1.5 s after its resume.
TEST(TcpLiveness, RanksStoppedTogetherDoNotBlameEachOther) {
  constexpr auto kTimeout = 400ms;
  int up[2][2], down[2][2], report[2][2];
  pid_t pid[2];
  for (int c = 0; c < 2; ++c) {
    ASSERT_EQ(pipe(up[c]), 0);
    ASSERT_EQ(pipe(down[c]), 0);
    ASSERT_EQ(pipe(report[c]), 0);
  }
  for (int c = 0; c < 2; ++c) {
    pid[c] = fork();
    if (pid[c] != 0) continue;
    for (int other = 0; other < 2; ++other) {  // only its own ends: EOF must come
      close(up[other][0]);
      close(down[other][1]);
      close(report[other][0]);
      if (other != c) {
        close(up[other][1]);
        close(down[other][0]);
        close(report[other][1]);
      }
    }
    std::unique_ptr<TcpLiveness> l;
    if (!TcpLiveness::listen(options(c, kTimeout), &l).ok()) _exit(2);
    const std::string mine = l->address() + "\n";
    char text[1024] = {};
    if (write(up[c][1], mine.data(), mine.size()) < 0 || read(down[c][0], text, sizeof text - 1) <= 0)
      _exit(2);
    if (!l->connect({{1 - c, std::string(text, strcspn(text, "\n"))}}).ok()) _exit(3);
    if (write(up[c][1], "c", 1) < 0) _exit(2);  // connected: stop me now
    std::this_thread::sleep_for(3 * kTimeout);  // stopped during this, and resumed
    const auto start = Clock::now();
    while (l->check().ok() && Clock::now() - start < 1500ms) std::this_thread::sleep_for(2ms);
    const std::string said = l->check().ok() ? "ok" : l->check().message();
    if (write(report[c][1], said.data(), said.size()) < 0) _exit(2);
    close(report[c][1]);
    if (read(down[c][0], text, 1) < 0) _exit(2);  // until both have reported
    _exit(0);
  }
  std::string address[2];
  for (int c = 0; c < 2; ++c) {
    char text[1024] = {};
    ASSERT_GT(read(up[c][0], text, sizeof text - 1), 0);
    address[c] = text;
  }
  for (int c = 0; c < 2; ++c) ASSERT_GT(write(down[c][1], address[1 - c].data(), address[1 - c].size()), 0);
  for (int c = 0; c < 2; ++c) {
    char byte;
    ASSERT_EQ(read(up[c][0], &byte, 1), 1);
  }
  for (int c = 0; c < 2; ++c) kill(pid[c], SIGSTOP);
  std::this_thread::sleep_for(2 * kTimeout);
  kill(pid[0], SIGCONT);
  std::this_thread::sleep_for(20ms);  // rank 1 still stopped when rank 0 looks
  kill(pid[1], SIGCONT);
  for (int c = 0; c < 2; ++c) {
    for (int fd : {up[c][0], up[c][1], down[c][0], report[c][1]}) close(fd);
    EXPECT_EQ(read_all(report[c][0]), "ok") << "rank " << c;
  }
  for (int c = 0; c < 2; ++c) {
    close(down[c][1]);  // the children may go
    int status = 0;
    waitpid(pid[c], &status, 0);
  }
}

}  // namespace
}  // namespace kolo::liveness
