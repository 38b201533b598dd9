// The node's AND (transports/shm/node_and.h) across processes under mpiexec (one
// node), on a node layer made through the MPI world's control plane: the vector
// limit, the carried bytes and unanimity, call after call.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tests/multirank/mpi/mpi_test_world.h"
#include "transports/shm/node.h"
#include "transports/shm/node_and.h"

namespace kolo::shm {
namespace {

using mpi::testing::test_world;

int rank() { return test_world().control->topology().rank; }
int size() { return test_world().control->topology().size; }

// An AND of its own, on a node layer of its own made through the world's
// control plane (every rank is on this node). Collective over the world.
std::unique_ptr<NodeAnd> own_board() {
  NodeOptions options;
  options.node_and = true;
  std::shared_ptr<Node> node;
  Status s = Node::create(*test_world().control, options, &node);
  EXPECT_TRUE(s.ok()) << s.to_string();
  std::unique_ptr<NodeAnd> board;
  if (node) {
    EXPECT_TRUE(NodeAnd::create(node, nullptr, &board).ok());
  }
  return board;
}

TEST(NodeAnd, MoreThanTheSlotHoldsIsAnInvalidArgument) {
  std::unique_ptr<NodeAnd> board = own_board();
  ASSERT_NE(board, nullptr);
  std::vector<uint64_t> bits(NodeAnd::kMaxWords + 1, ~uint64_t{0});
  Status status = board->run(&bits);
  EXPECT_EQ(status.code(), Code::kInvalidArgument);
  EXPECT_NE(status.message().find("at most 512"), std::string::npos) << status.message();
  // Refused before anything was published: the next call still pairs up.
  bits.assign(3, ~uint64_t{0});
  bits[1] = ~(uint64_t{1} << rank());
  ASSERT_TRUE(board->run(&bits).ok());
  uint64_t expected = ~uint64_t{0};
  for (int r = 0; r < size(); ++r) expected &= ~(uint64_t{1} << r);
  EXPECT_EQ(bits[0], ~uint64_t{0});
  EXPECT_EQ(bits[1], expected);
}

// Note [Data rides with the AND]: each call says whether every rank passed the
// same vector, and what each rank wrote at its carry slot before the call is
// readable by all until the next call. Calls alternate equal and unequal
// vectors, and each call's bytes depend on the call, so a stale slot shows.
// The vectors' lengths change from call to call, up to the longest, so the
// carry's place moves with them, and some calls carry in the vector's own line
// (Note [The carry shares the vector's line]), filling what is left of it: a
// full carry, after the longest vector or in the line, must leave the vectors
// and the other slot whole.
TEST(NodeAnd, CarriedBytesAndUnanimity) {
  std::unique_ptr<NodeAnd> board = own_board();
  ASSERT_NE(board, nullptr);
  EXPECT_FALSE(board->unanimous());  // no call yet
  auto byte_of = [](int call, int r, size_t i) {
    return static_cast<char>((call * 13 + r * 7 + i) & 0xff);
  };
  const size_t lengths[] = {3, 4, 1, 6, NodeAnd::kMaxWords, 4, 5};
  for (int call = 0; call < 42; ++call) {
    const size_t words = lengths[call % 7];
    const size_t room = NodeAnd::carry_capacity(words, /*in_line=*/true);
    const bool in_line = room > 0 && call % 4 != 1;
    const size_t n = in_line ? room : call % 3 == 0 ? NodeAnd::kCarryBytes : 8 + static_cast<size_t>(call);
    char* slot = board->carry_slot(words, in_line);
    for (size_t i = 0; i < n; ++i) slot[i] = byte_of(call, rank(), i);
    // Odd calls: the last rank's vector differs (in its last word).
    const bool differ = call % 2 == 1 && size() > 1;
    std::vector<uint64_t> bits(words, ~uint64_t{0});
    if (differ && rank() == size() - 1) bits[words - 1] = ~uint64_t{1};
    ASSERT_TRUE(board->run(&bits).ok()) << "call " << call;
    EXPECT_EQ(board->unanimous(), !differ) << "call " << call;
    EXPECT_EQ(bits[words - 1], differ ? ~uint64_t{1} : ~uint64_t{0}) << "call " << call;
    for (size_t w = 0; w + 1 < words; ++w) ASSERT_EQ(bits[w], ~uint64_t{0}) << "call " << call;
    size_t wrong = 0;
    for (int r = 0; r < size(); ++r) {
      const char* theirs = board->carried(r);
      for (size_t i = 0; i < n; ++i) wrong += theirs[i] != byte_of(call, r, i);
    }
    EXPECT_EQ(wrong, 0u) << "call " << call << ", " << n << " bytes" << (in_line ? " in line" : "");
  }
}

}  // namespace
}  // namespace kolo::shm
