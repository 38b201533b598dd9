// The ring's index math, for every world size 1..64 and many counts: the chunks
// partition the buffer, each step's send of rank r is the receive of rank r+1, and
// a symbolic run of the schedule leaves every rank with every rank's contribution
// to every chunk, each exactly once.
#include "algorithms/ring_schedule.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <vector>

namespace kolo::algorithms {
namespace {

constexpr int kMaxSize = 64;

std::vector<int64_t> counts_for(int size) {
  std::set<int64_t> counts = {0, 1, 2, 3, 7, 1000, 4096, 12345, (int64_t{1} << 20) + 3};
  for (int64_t c : {size - 1, size, size + 1, 2 * size - 1, 3 * size + 2}) {
    if (c >= 0) counts.insert(c);
  }
  return {counts.begin(), counts.end()};
}

TEST(RingScheduleTest, ExampleOfThreeRanks) {
  const RingSchedule s(0, 3, 10);
  EXPECT_EQ(s.chunk(0), (Range{0, 4}));
  EXPECT_EQ(s.chunk(1), (Range{4, 3}));
  EXPECT_EQ(s.chunk(2), (Range{7, 3}));
  EXPECT_EQ(s.left(), 2);
  EXPECT_EQ(s.right(), 1);
  EXPECT_EQ(s.steps(), 2);
  EXPECT_EQ(s.reduce_scatter_send(0), 0);
  EXPECT_EQ(s.reduce_scatter_recv(0), 2);
  EXPECT_EQ(s.reduce_scatter_send(1), 2);
  EXPECT_EQ(s.reduce_scatter_recv(1), 1);
  EXPECT_EQ(s.owned_chunk(), 1);
  EXPECT_EQ(s.allgather_send(0), 1);
  EXPECT_EQ(s.allgather_recv(0), 0);
  EXPECT_EQ(s.allgather_send(1), 0);
  EXPECT_EQ(s.allgather_recv(1), 2);
}

TEST(RingScheduleTest, ChunksPartitionTheBuffer) {
  for (int size = 1; size <= kMaxSize; ++size) {
    for (int64_t count : counts_for(size)) {
      const RingSchedule s(0, size, count);
      int64_t next = 0;
      for (int c = 0; c < size; ++c) {
        const Range r = s.chunk(c);
        ASSERT_EQ(r.begin, next) << "size " << size << " count " << count << " chunk " << c;
        ASSERT_EQ(r.count, count / size + (c < count % size ? 1 : 0))
            << "size " << size << " count " << count << " chunk " << c;
        next = r.end();
      }
      ASSERT_EQ(next, count) << "size " << size;
      EXPECT_EQ(s.max_chunk_count(), (count + size - 1) / size);
      // Every rank cuts the same chunks.
      const RingSchedule last(size - 1, size, count);
      for (int c = 0; c < size; ++c) ASSERT_EQ(last.chunk(c), s.chunk(c));
    }
  }
}

TEST(RingScheduleTest, PeersFormARing) {
  for (int size = 1; size <= kMaxSize; ++size) {
    for (int rank = 0; rank < size; ++rank) {
      const RingSchedule s(rank, size, 100);
      EXPECT_EQ(s.right(), (rank + 1) % size);
      EXPECT_EQ(s.left(), (rank + size - 1) % size);
      EXPECT_EQ(RingSchedule(s.right(), size, 100).left(), rank);
      EXPECT_EQ(s.steps(), size - 1);
    }
  }
}

TEST(RingScheduleTest, SendOfEachRankIsReceiveOfItsRightNeighbour) {
  for (int size = 1; size <= kMaxSize; ++size) {
    for (int rank = 0; rank < size; ++rank) {
      const RingSchedule me(rank, size, 1000);
      const RingSchedule right(me.right(), size, 1000);
      for (int step = 0; step < me.steps(); ++step) {
        ASSERT_EQ(me.reduce_scatter_send(step), right.reduce_scatter_recv(step));
        ASSERT_EQ(me.allgather_send(step), right.allgather_recv(step));
        // A rank forwards at step s+1 what it received at step s.
        if (step + 1 < me.steps()) {
          ASSERT_EQ(me.reduce_scatter_send(step + 1), me.reduce_scatter_recv(step));
          ASSERT_EQ(me.allgather_send(step + 1), me.allgather_recv(step));
        }
      }
    }
  }
}

// Runs the schedule on contribution sets: holds[r][c] is the set of ranks whose
// part of chunk c rank r has combined (a bit mask; 64 ranks at most).
TEST(RingScheduleTest, SymbolicRunGivesEveryRankTheFullReduction) {
  for (int size = 1; size <= kMaxSize; ++size) {
    const uint64_t all = size == 64 ? ~uint64_t{0} : (uint64_t{1} << size) - 1;
    std::vector<RingSchedule> ranks;
    for (int r = 0; r < size; ++r) ranks.emplace_back(r, size, 1000);
    std::vector<std::vector<uint64_t>> holds(size, std::vector<uint64_t>(size));
    std::vector<std::vector<bool>> written(size, std::vector<bool>(size, false));
    for (int r = 0; r < size; ++r) {
      for (int c = 0; c < size; ++c) holds[r][c] = uint64_t{1} << r;
    }
    for (int step = 0; step < size - 1; ++step) {
      auto before = holds;  // all ranks send at once
      for (int r = 0; r < size; ++r) {
        const int to = ranks[r].right();
        const int c = ranks[to].reduce_scatter_recv(step);
        ASSERT_EQ(before[to][c] & before[r][c], 0u) << "a contribution counted twice";
        holds[to][c] = before[to][c] | before[r][c];
        ASSERT_FALSE(written[to][c]) << "a chunk combined twice from input";
        written[to][c] = true;
      }
    }
    for (int r = 0; r < size; ++r) {
      ASSERT_EQ(holds[r][ranks[r].owned_chunk()], all) << "size " << size << " rank " << r;
      // The chunk still unwritten is the one sent first (from input).
      for (int c = 0; c < size; ++c) ASSERT_EQ(written[r][c], c != r);
      if (size > 1) {
        EXPECT_EQ(ranks[r].allgather_recv(0), r);
      }
    }
    for (int step = 0; step < size - 1; ++step) {
      auto before = holds;
      for (int r = 0; r < size; ++r) {
        const int to = ranks[r].right();
        const int c = ranks[to].allgather_recv(step);
        ASSERT_EQ(before[r][c], all) << "forwarded an unfinished chunk";
        holds[to][c] = before[r][c];
      }
    }
    for (int r = 0; r < size; ++r) {
      for (int c = 0; c < size; ++c) ASSERT_EQ(holds[r][c], all) << size << " " << r << " " << c;
    }
  }
}

TEST(RingScheduleTest, SegmentsPartitionChunks) {
  for (int64_t chunk_count : {int64_t{0}, int64_t{1}, int64_t{2}, int64_t{7}, int64_t{64},
                              int64_t{1000}, int64_t{65537}}) {
    for (int64_t seg : {int64_t{1}, int64_t{2}, int64_t{3}, int64_t{7}, int64_t{64}, int64_t{1000},
                        int64_t{1} << 20}) {
      const Range chunk{12345, chunk_count};
      const int64_t n = RingSchedule::num_segments(chunk_count, seg);
      EXPECT_EQ(n, (chunk_count + seg - 1) / seg);
      int64_t next = chunk.begin;
      for (int64_t k = 0; k < n; ++k) {
        const Range r = RingSchedule::segment(chunk, seg, k);
        ASSERT_EQ(r.begin, next);
        ASSERT_GE(r.count, 1);
        ASSERT_LE(r.count, seg);
        if (k + 1 < n) {
          ASSERT_EQ(r.count, seg);
        }
        next = r.end();
      }
      ASSERT_EQ(next, chunk.end()) << chunk_count << " / " << seg;
    }
  }
}

}  // namespace
}  // namespace kolo::algorithms
