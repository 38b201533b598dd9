// Point-to-point over the socket world (transports/socket/socket_point_to_point.h):
// small (eager) and large (announced, chunked) messages, order, unexpected
// messages, sizes that differ, and messages to oneself.
#include <gtest/gtest.h>

#include <numeric>

#include "tests/unit/socket/socket_job.h"
#include "transports/socket/frame.h"

namespace kolo::socket {
namespace {

using testing::SocketJob;
using transport::RequestId;

std::vector<uint8_t> pattern(size_t bytes, int seed) {
  std::vector<uint8_t> v(bytes);
  for (size_t i = 0; i < bytes; ++i) v[i] = static_cast<uint8_t>((i * 131 + seed * 17) >> 3);
  return v;
}

class Sizes : public ::testing::TestWithParam<size_t> {};

// Rank 0 sends to rank 1 and back, with the receive posted before or after the
// send arrives.
TEST_P(Sizes, ARoundTripArrivesWhole) {
  const size_t bytes = GetParam();
  SocketJob job;
  job.run_ok(2, [&](int r, transport::World& w) {
    transport::PointToPoint& p2p = *w.p2p;
    const std::vector<uint8_t> mine = pattern(bytes, r);
    std::vector<uint8_t> got(bytes, 0xEE);
    RequestId s = 0, q = 0;
    if (r == 0) {
      ASSERT_TRUE(p2p.isend(1, mine.data(), bytes, 5, &s).ok());
      ASSERT_TRUE(p2p.wait(s).ok());
      ASSERT_TRUE(p2p.irecv(1, got.data(), bytes, 6, &q).ok());
      ASSERT_TRUE(p2p.wait(q).ok());
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // rank 0's send comes first
      ASSERT_TRUE(p2p.irecv(0, got.data(), bytes, 5, &q).ok());
      ASSERT_TRUE(p2p.isend(0, mine.data(), bytes, 6, &s).ok());
      ASSERT_TRUE(p2p.wait(q).ok());
      ASSERT_TRUE(p2p.wait(s).ok());
    }
    EXPECT_TRUE(got == pattern(bytes, 1 - r));
  });
}

INSTANTIATE_TEST_SUITE_P(Socket, Sizes,
                         ::testing::Values(size_t{0}, size_t{1}, size_t{4096}, kEagerBytes,
                                           kEagerBytes + 1, kChunkBytes, 3 * kChunkBytes + 123,
                                           size_t{16} << 20));

TEST(SocketP2P, MessagesOfOneTagMatchInOrderAndTagsApart) {
  SocketJob job;
  job.run_ok(2, [](int r, transport::World& w) {
    transport::PointToPoint& p2p = *w.p2p;
    constexpr int kN = 20;
    // Sizes alternate between eager and announced, so both kinds must keep order.
    auto size_of = [](int i) { return i % 2 ? kEagerBytes * 2 + i : size_t(i + 1); };
    if (r == 0) {
      std::vector<std::vector<uint8_t>> out;
      std::vector<RequestId> ids;
      for (int i = 0; i < kN; ++i) out.push_back(pattern(size_of(i), i));
      for (int i = 0; i < kN; ++i) {
        RequestId id;
        ASSERT_TRUE(p2p.isend(1, out[i].data(), out[i].size(), i % 3 == 0 ? 7 : 8, &id).ok());
        ids.push_back(id);
      }
      for (RequestId id : ids) ASSERT_TRUE(p2p.wait(id).ok());
    } else {
      // Tag 8's messages are received first, tag 7's after: tags do not block each other.
      std::vector<std::vector<uint8_t>> in(kN);
      std::vector<RequestId> ids;
      for (int tag : {8, 7}) {
        for (int i = 0; i < kN; ++i) {
          if ((i % 3 == 0 ? 7 : 8) != tag) continue;
          in[i].resize(size_of(i));
          RequestId id;
          ASSERT_TRUE(p2p.irecv(0, in[i].data(), in[i].size(), tag, &id).ok());
          ids.push_back(id);
        }
      }
      for (RequestId id : ids) ASSERT_TRUE(p2p.wait(id).ok());
      for (int i = 0; i < kN; ++i) EXPECT_TRUE(in[i] == pattern(size_of(i), i)) << i;
    }
  });
}

TEST(SocketP2P, AReceiveOfAnotherSizeFailsOnBothSidesOfALargeMessage) {
  SocketJob job;
  job.run_ok(2, [](int r, transport::World& w) {
    std::vector<uint8_t> big(kEagerBytes * 4);
    RequestId id;
    if (r == 0) {
      ASSERT_TRUE(w.p2p->isend(1, big.data(), big.size(), 1, &id).ok());
      Status s = w.p2p->wait(id);
      EXPECT_FALSE(s.ok());
      EXPECT_NE(s.message().find("another size"), std::string::npos) << s.message();
    } else {
      ASSERT_TRUE(w.p2p->irecv(0, big.data(), big.size() - 1, 1, &id).ok());
      Status s = w.p2p->wait(id);
      EXPECT_NE(s.message().find("posted " + std::to_string(big.size() - 1)), std::string::npos)
          << s.message();
    }
    // The connection is still good.
    uint32_t x = 7;
    if (r == 0) {
      ASSERT_TRUE(w.p2p->isend(1, &x, 4, 2, &id).ok());
    } else {
      x = 0;
      ASSERT_TRUE(w.p2p->irecv(0, &x, 4, 2, &id).ok());
    }
    ASSERT_TRUE(w.p2p->wait(id).ok());
    EXPECT_EQ(x, 7u);
  });
}

TEST(SocketP2P, ASmallMessageOfAnotherSizeFails) {
  SocketJob job;
  job.run_ok(2, [](int r, transport::World& w) {
    uint64_t v = 1;
    RequestId id;
    if (r == 0) {
      ASSERT_TRUE(w.p2p->isend(1, &v, 8, 1, &id).ok());
      EXPECT_TRUE(w.p2p->wait(id).ok());
    } else {
      ASSERT_TRUE(w.p2p->irecv(0, &v, 4, 1, &id).ok());
      EXPECT_NE(w.p2p->wait(id).message().find("received 8 bytes"), std::string::npos);
    }
  });
}

TEST(SocketP2P, ToItselfAndTestedToCompletion) {
  SocketJob job;
  job.run_ok(1, [](int, transport::World& w) {
    std::vector<uint8_t> out = pattern(kEagerBytes * 3, 1), in(out.size());
    RequestId s, q;
    ASSERT_TRUE(w.p2p->isend(0, out.data(), out.size(), 3, &s).ok());
    ASSERT_TRUE(w.p2p->irecv(0, in.data(), in.size(), 3, &q).ok());
    bool done = false;
    while (!done) ASSERT_TRUE(w.p2p->test(q, &done).ok());
    EXPECT_TRUE(w.p2p->wait(q).ok());
    EXPECT_TRUE(w.p2p->wait(s).ok());
    EXPECT_TRUE(in == out);
  });
}

// The ring transport over the socket world gives the exact sum.
TEST(SocketP2P, TheRingAllreducesOverIt) {
  for (int n : {2, 3, 4}) {
    SocketJob job;
    job.run_ok(n, [&](int r, transport::World& w) {
      transport::Transport* ring = nullptr;
      for (auto& t : w.transports)
        if (std::string(t->name()) == "ring") ring = t.get();
      ASSERT_NE(ring, nullptr);
      for (int64_t count : {int64_t{0}, int64_t{1}, int64_t{3}, int64_t{1000003}}) {
        std::vector<int32_t> data(static_cast<size_t>(count));
        for (int64_t i = 0; i < count; ++i) data[i] = static_cast<int32_t>(i % 1000) * (r + 1);
        transport::Bucket b;
        b.tensors.push_back({data.data(), data.data(), count, nullptr});
        b.count = count;
        b.dtype = DataType::kInt32;
        std::vector<char> staging(static_cast<size_t>(count) * 4 + 64);
        b.staging = staging.data();
        b.staging_bytes = staging.size();
        ASSERT_TRUE(ring->allreduce(b)->wait().ok());
        const int32_t factor = n * (n + 1) / 2;
        for (int64_t i = 0; i < count; ++i)
          ASSERT_EQ(data[i], static_cast<int32_t>(i % 1000) * factor) << "count " << count << " i " << i;
      }
    });
  }
}

}  // namespace
}  // namespace kolo::socket
