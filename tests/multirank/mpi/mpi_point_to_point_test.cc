// MPI point-to-point verbs under mpiexec: a ring exchange at sizes from 0 bytes to
// past MPI's rendezvous threshold, messages split into pieces, test(), order on
// one tag, and the errors a caller can cause.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

#include "tests/multirank/mpi/mpi_test_world.h"
#include "transports/mpi/mpi_point_to_point.h"
#include "transports/mpi/mpi_wait.h"

namespace kolo::mpi {
namespace {

using testing::test_world;
using transport::RequestId;

transport::PointToPoint& p2p() { return *test_world().p2p; }
int rank() { return p2p().rank(); }
int size() { return p2p().size(); }
int right() { return (rank() + 1) % size(); }
int left() { return (rank() + size() - 1) % size(); }

// What rank `from` sends: byte i depends on the sender and the position.
std::vector<uint8_t> message_of(int from, size_t bytes) {
  std::vector<uint8_t> m(bytes);
  for (size_t i = 0; i < bytes; ++i) m[i] = static_cast<uint8_t>(i * 13 + from * 101 + (i >> 8));
  return m;
}

// Sends message_of(rank) to the right, receives the left's, over `verbs`.
void ring_exchange(transport::PointToPoint& verbs, size_t bytes, int tag) {
  SCOPED_TRACE("bytes " + std::to_string(bytes));
  std::vector<uint8_t> out = message_of(rank(), bytes);
  std::vector<uint8_t> in(bytes, 0xEE);
  RequestId recv = 0, send = 0;
  ASSERT_TRUE(verbs.irecv(left(), in.data(), bytes, tag, &recv).ok());
  ASSERT_TRUE(verbs.isend(right(), out.data(), bytes, tag, &send).ok());
  Status received = verbs.wait(recv);
  Status sent = verbs.wait(send);
  ASSERT_TRUE(received.ok()) << received.to_string();
  ASSERT_TRUE(sent.ok()) << sent.to_string();
  EXPECT_TRUE(in == message_of(left(), bytes));
}

TEST(MpiPointToPoint, RankAndSizeMatchTheWorld) {
  int world_rank = 0, world_size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  EXPECT_EQ(rank(), world_rank);
  EXPECT_EQ(size(), world_size);
}

TEST(MpiPointToPoint, RingExchangeFromEmptyToLarge) {
  // 8 MiB is far past MPICH's eager limit, so the rendezvous path runs too.
  for (size_t bytes : {size_t{1}, size_t{7}, size_t{1000}, size_t{65537}, size_t{8} << 20}) {
    ring_exchange(p2p(), bytes, 3);
  }
}

TEST(MpiPointToPoint, ZeroByteMessageWithNullBuffer) {
  RequestId recv = 0, send = 0;
  ASSERT_TRUE(p2p().irecv(left(), nullptr, 0, 4, &recv).ok());
  ASSERT_TRUE(p2p().isend(right(), nullptr, 0, 4, &send).ok());
  EXPECT_TRUE(p2p().wait(recv).ok());
  EXPECT_TRUE(p2p().wait(send).ok());
}

TEST(MpiPointToPoint, SendToSelf) {
  std::vector<uint8_t> out = message_of(rank(), 300), in(300, 0);
  RequestId recv = 0, send = 0;
  ASSERT_TRUE(p2p().irecv(rank(), in.data(), in.size(), 5, &recv).ok());
  ASSERT_TRUE(p2p().isend(rank(), out.data(), out.size(), 5, &send).ok());
  EXPECT_TRUE(p2p().wait(send).ok());
  EXPECT_TRUE(p2p().wait(recv).ok());
  EXPECT_TRUE(in == out);
}

TEST(MpiPointToPoint, MessagesOnOneTagArriveInOrder) {
  const int messages = 64;
  std::vector<int64_t> out(messages), in(messages, -1);
  std::vector<RequestId> recvs(messages), sends(messages);
  for (int i = 0; i < messages; ++i) {
    out[i] = rank() * 1000 + i;
    ASSERT_TRUE(p2p().irecv(left(), &in[i], sizeof(int64_t), 6, &recvs[i]).ok());
  }
  for (int i = 0; i < messages; ++i) {
    ASSERT_TRUE(p2p().isend(right(), &out[i], sizeof(int64_t), 6, &sends[i]).ok());
  }
  for (int i = 0; i < messages; ++i) {
    EXPECT_TRUE(p2p().wait(sends[i]).ok());
    EXPECT_TRUE(p2p().wait(recvs[i]).ok());
    EXPECT_EQ(in[i], left() * 1000 + i);
  }
}

TEST(MpiPointToPoint, TestReportsCompletionOnlyOnceTheSendHappened) {
  int64_t in = -1, out = rank();
  RequestId recv = 0, send = 0;
  ASSERT_TRUE(p2p().irecv(left(), &in, sizeof(in), 7, &recv).ok());
  bool done = true;
  ASSERT_TRUE(p2p().test(recv, &done).ok());
  EXPECT_FALSE(done) << "nobody has sent yet: every rank sends after the barrier";
  ASSERT_TRUE(test_world().control->barrier().ok());
  ASSERT_TRUE(p2p().isend(right(), &out, sizeof(out), 7, &send).ok());
  Waiter waiter;
  done = false;
  while (!done) {
    ASSERT_TRUE(p2p().test(recv, &done).ok());
    if (!done) waiter.pause();
  }
  EXPECT_EQ(in, left());
  EXPECT_TRUE(p2p().wait(recv).ok()) << "a tested request is still waited on, at once";
  EXPECT_TRUE(p2p().wait(send).ok());
}

TEST(MpiPointToPoint, LongMessagesTravelInPieces) {
  // Pieces of at most 1000 bytes stand in for the INT_MAX split.
  MpiPointToPoint small_pieces(testing::dup_world_comms(), 1000);
  for (size_t bytes : {size_t{0}, size_t{999}, size_t{1000}, size_t{1001}, size_t{3000},
                       size_t{10007}}) {
    ring_exchange(small_pieces, bytes, 8);
  }
}

TEST(MpiPointToPoint, ReceivingFewerBytesThanPostedIsAnError) {
  std::vector<uint8_t> out = message_of(rank(), 60), in(100, 0);
  RequestId recv = 0, send = 0;
  ASSERT_TRUE(p2p().irecv(left(), in.data(), in.size(), 9, &recv).ok());
  ASSERT_TRUE(p2p().isend(right(), out.data(), out.size(), 9, &send).ok());
  Status received = p2p().wait(recv);
  EXPECT_EQ(received.code(), Code::kTransport);
  EXPECT_NE(received.message().find("received 60 bytes"), std::string::npos)
      << received.message();
  EXPECT_TRUE(p2p().wait(send).ok());
}

TEST(MpiPointToPoint, ReceivingMoreBytesThanPostedIsAnError) {
  std::vector<uint8_t> out = message_of(rank(), 100), in(60, 0);
  RequestId recv = 0, send = 0;
  ASSERT_TRUE(p2p().irecv(left(), in.data(), in.size(), 10, &recv).ok());
  ASSERT_TRUE(p2p().isend(right(), out.data(), out.size(), 10, &send).ok());
  Status received = p2p().wait(recv);
  EXPECT_EQ(received.code(), Code::kTransport) << received.to_string();
  EXPECT_NE(received.message().find("MPI_Test"), std::string::npos) << received.message();
  EXPECT_TRUE(p2p().wait(send).ok());
  // The verbs still work afterwards.
  ASSERT_TRUE(test_world().control->barrier().ok());
  ring_exchange(p2p(), 16, 11);
}

TEST(MpiPointToPoint, BadArgumentsAreErrorsNotCrashes) {
  int64_t word = 0;
  RequestId id = 0;
  EXPECT_EQ(p2p().isend(size(), &word, 8, 0, &id).code(), Code::kInvalidArgument);
  EXPECT_EQ(p2p().irecv(-1, &word, 8, 0, &id).code(), Code::kInvalidArgument);
  EXPECT_EQ(p2p().isend(right(), &word, 8, -1, &id).code(), Code::kInvalidArgument);
  EXPECT_EQ(p2p().wait(123456789).code(), Code::kInternal);
  bool done = false;
  EXPECT_EQ(p2p().test(123456789, &done).code(), Code::kInternal);
}

}  // namespace
}  // namespace kolo::mpi
