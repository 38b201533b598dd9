// The rendezvous store over TCP (transports/socket/tcp_store.h): its operations,
// its timeouts and the connections it must drop.
#include "transports/socket/tcp_store.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>

namespace kolo::socket {
namespace {

using std::chrono::milliseconds;

Endpoint loopback(uint16_t port = 0) {
  Endpoint e;
  EXPECT_TRUE(resolve("127.0.0.1", port, &e).ok());
  return e;
}

class TcpStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TcpStoreServer::Options options;
    options.token = "job-token";
    options.hello_limit = milliseconds(300);
    ASSERT_TRUE(TcpStoreServer::start(loopback(), options, &server_).ok());
  }
  std::unique_ptr<TcpStore> client(const std::string& token = "job-token") {
    std::unique_ptr<TcpStore> c;
    Status s = TcpStore::connect(server_->endpoint(), token, 0, 0, milliseconds(2000), &c);
    EXPECT_TRUE(s.ok()) << s.to_string();
    return c;
  }
  // A raw TCP connection to the server.
  Fd raw() {
    Fd fd;
    EXPECT_TRUE(connect_to(server_->endpoint(), Clock::now() + std::chrono::seconds(2), "store", &fd).ok());
    return fd;
  }
  // Reads until the server closes: what it wrote (empty if nothing), and
  // whether it closed within `limit`.
  static bool closed_without_a_word(int fd, milliseconds limit) {
    const auto deadline = Clock::now() + limit;
    Frame f;
    Status s = read_frame(fd, deadline, "the store", &f, 1 << 20);
    return !s.ok() && s.message().find("closed the connection") != std::string::npos &&
           s.message().find("in the middle") == std::string::npos;
  }

  std::unique_ptr<TcpStoreServer> server_;
};

TEST_F(TcpStoreTest, SetGetAddCompareAndDelete) {
  auto c = client();
  ASSERT_TRUE(c->set("a", std::string("x\0y", 3)).ok());
  std::string v;
  ASSERT_TRUE(c->get("a", milliseconds(100), &v).ok());
  EXPECT_EQ(v, std::string("x\0y", 3));
  bool found = true;
  ASSERT_TRUE(c->try_get("missing", &v, &found).ok());
  EXPECT_FALSE(found);
  int64_t n = 0;
  ASSERT_TRUE(c->add("n", 5, &n).ok());
  ASSERT_TRUE(c->add("n", -2, &n).ok());
  EXPECT_EQ(n, 3);
  Status s = c->add("a", 1, &n);
  EXPECT_NE(s.message().find("not an integer"), std::string::npos) << s.message();
  std::string now;
  ASSERT_TRUE(c->compare_and_set("cas", "", "first", &now).ok());
  EXPECT_EQ(now, "first");
  ASSERT_TRUE(c->compare_and_set("cas", "wrong", "second", &now).ok());
  EXPECT_EQ(now, "first");
  ASSERT_TRUE(c->compare_and_set("cas", "first", "second", &now).ok());
  EXPECT_EQ(now, "second");
  ASSERT_TRUE(c->set("p/1", "").ok());
  ASSERT_TRUE(c->set("p/2", "").ok());
  ASSERT_TRUE(c->set("q/1", "").ok());
  int64_t removed = 0;
  ASSERT_TRUE(c->delete_prefix("p/", &removed).ok());
  EXPECT_EQ(removed, 2);
  ASSERT_TRUE(c->try_get("q/1", &v, &found).ok());
  EXPECT_TRUE(found);
}

TEST_F(TcpStoreTest, WaitReturnsWhenAnotherClientSetsTheKeys) {
  auto waiter = client();
  std::thread setter([this] {
    auto c = client();
    std::this_thread::sleep_for(milliseconds(50));
    EXPECT_TRUE(c->set("k1", "1").ok());
    std::this_thread::sleep_for(milliseconds(50));
    EXPECT_TRUE(c->set("k2", "2").ok());
  });
  const auto start = Clock::now();
  Status s = waiter->wait({"k1", "k2"}, std::chrono::seconds(5));
  setter.join();
  EXPECT_TRUE(s.ok()) << s.to_string();
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(4));
}

TEST_F(TcpStoreTest, WaitTimesOutNamingTheStoreAndTheKeys) {
  auto c = client();
  const auto start = Clock::now();
  Status s = c->wait({"never"}, milliseconds(200));
  const auto took = Clock::now() - start;
  EXPECT_EQ(s.code(), Code::kTimeout) << s.to_string();
  EXPECT_NE(s.message().find(server_->endpoint().to_string()), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("'never'"), std::string::npos) << s.message();
  EXPECT_GE(took, milliseconds(190));
  EXPECT_LT(took, milliseconds(2000));
  // The client reconnects for its next call.
  ASSERT_TRUE(c->set("after", "1").ok());
  std::string v;
  EXPECT_TRUE(c->get("after", milliseconds(100), &v).ok());
}

TEST_F(TcpStoreTest, AWrongTokenIsRefusedAndCanChangeNothing) {
  std::unique_ptr<TcpStore> c;
  Status s = TcpStore::connect(server_->endpoint(), "wrong", 0, 0, milliseconds(2000), &c);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("job token"), std::string::npos) << s.message();
  // A hello with the wrong token followed by a set: dropped, unanswered, and the
  // set never happens.
  Fd fd = raw();
  Hello hello;
  hello.role = Role::kStore;
  hello.token = "wrong";
  StoreRequest q;
  q.op = StoreOp::kSet;
  q.keys = {"injected"};
  q.value = "evil";
  const std::string bytes = encode_frame(FrameType::kHello, 0, 0, encode_hello(hello)) +
                            encode_frame(FrameType::kStoreRequest, 0, 0, encode_store_request(q));
  ASSERT_TRUE(write_all(fd.get(), bytes, Clock::now() + std::chrono::seconds(1), "store").ok());
  EXPECT_TRUE(closed_without_a_word(fd.get(), milliseconds(2000)));
  std::string v;
  bool found = true;
  ASSERT_TRUE(client()->try_get("injected", &v, &found).ok());
  EXPECT_FALSE(found);
}

TEST_F(TcpStoreTest, ARequestBeforeHelloIsDropped) {
  Fd fd = raw();
  StoreRequest q;
  q.op = StoreOp::kSet;
  q.keys = {"injected"};
  ASSERT_TRUE(write_all(fd.get(), encode_frame(FrameType::kStoreRequest, 0, 0, encode_store_request(q)),
                        Clock::now() + std::chrono::seconds(1), "store").ok());
  EXPECT_TRUE(closed_without_a_word(fd.get(), milliseconds(2000)));
  std::string v;
  bool found = true;
  ASSERT_TRUE(client()->try_get("injected", &v, &found).ok());
  EXPECT_FALSE(found);
}

TEST_F(TcpStoreTest, GarbageBytesAreDroppedAndTheStoreGoesOn) {
  Fd fd = raw();
  ASSERT_TRUE(write_all(fd.get(), "GET / HTTP/1.1\r\nHost: kolo\r\n\r\n",
                        Clock::now() + std::chrono::seconds(1), "store").ok());
  EXPECT_TRUE(closed_without_a_word(fd.get(), milliseconds(2000)));
  auto c = client();
  EXPECT_TRUE(c->set("still", "here").ok());
}

TEST_F(TcpStoreTest, ASilentConnectionIsDroppedAfterTheHelloLimit) {
  Fd fd = raw();
  const auto start = Clock::now();
  EXPECT_TRUE(closed_without_a_word(fd.get(), milliseconds(3000)));
  EXPECT_GE(Clock::now() - start, milliseconds(250));
}

TEST_F(TcpStoreTest, AnOversizedFrameIsDropped) {
  auto c = client();  // authenticated connections are held to the bounds too
  Fd fd = raw();
  std::string header;
  encode_header(FrameHeader{FrameType::kHello, 0, 1u << 30, 0}, &header);
  ASSERT_TRUE(write_all(fd.get(), header, Clock::now() + std::chrono::seconds(1), "store").ok());
  EXPECT_TRUE(closed_without_a_word(fd.get(), milliseconds(2000)));
  EXPECT_TRUE(c->set("fine", "1").ok());
}

TEST(TcpStore, AnUnreachableStoreFailsWithinTheTimeoutNamingTheAddress) {
  Fd fd;
  Endpoint bound;
  ASSERT_TRUE(listen_on(loopback(), &fd, &bound).ok());
  fd.reset();  // nothing listens there now
  std::unique_ptr<TcpStore> c;
  const auto start = Clock::now();
  Status s = TcpStore::connect(bound, "t", 1, 0, milliseconds(500), &c);
  const auto took = Clock::now() - start;
  EXPECT_EQ(s.code(), Code::kTimeout) << s.to_string();
  EXPECT_NE(s.message().find(bound.to_string()), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("the store"), std::string::npos) << s.message();
  EXPECT_LT(took, milliseconds(1500));
}

TEST(TcpStore, APortInUseIsAClearError) {
  TcpStoreServer::Options options;
  options.token = "t";
  std::unique_ptr<TcpStoreServer> first, second;
  ASSERT_TRUE(TcpStoreServer::start(loopback(), options, &first).ok());
  int err = 0;
  Status s = TcpStoreServer::start(first->endpoint(), options, &second, &err);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(err, EADDRINUSE);
  EXPECT_NE(s.message().find("address in use"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(first->endpoint().to_string()), std::string::npos) << s.message();
}

TEST(TcpStore, GenerationsDoNotSeeEachOthersKeys) {
  TcpStoreServer::Options options;
  options.token = "t";
  std::unique_ptr<TcpStoreServer> server;
  ASSERT_TRUE(TcpStoreServer::start(loopback(), options, &server).ok());
  std::unique_ptr<TcpStore> c;
  ASSERT_TRUE(TcpStore::connect(server->endpoint(), "t", 0, 0, milliseconds(2000), &c).ok());
  ScopedStore g1(*c, generation_prefix(1));
  ScopedStore g2(*c, generation_prefix(2));
  ASSERT_TRUE(g1.set("rank/0", "old").ok());
  std::string v;
  bool found = true;
  ASSERT_TRUE(g2.try_get("rank/0", &v, &found).ok());
  EXPECT_FALSE(found);
  EXPECT_EQ(g2.wait({"rank/0"}, milliseconds(100)).code(), Code::kTimeout);
}

}  // namespace
}  // namespace kolo::socket
