// RingSchedule: the index math of the ring allreduce, and nothing else.
//
// Pure: no I/O, no allocation, no state beyond (rank, size, count). Kept apart
// from ring_allreduce.cc (as UCC keeps coll_patterns/ring.h apart from its
// transports) so that every world size and count can be checked exhaustively in
// milliseconds (tests/unit/algorithms/ring_schedule_test.cc).
//
// Vocabulary (see the picture at the top of ring_allreduce.cc):
// - chunk: the buffer of `count` elements is cut into `size` chunks, one per rank.
//   Chunk c has count / size elements, plus one for the first count % size chunks,
//   so sizes differ by at most one; chunks are empty when count < size.
// - step: one round in which every rank sends one chunk to its right neighbour
//   and receives one chunk from its left neighbour. The reduce-scatter has size-1
//   steps, the allgather size-1 more.
// - segment: a chunk travels in segments of at most S elements, so that reducing
//   segment k overlaps receiving segment k+1.
//
// Invariant: every rank computes the same chunk boundaries, and at every step
// rank r sends exactly the chunk (and segments) that rank r+1 receives.
#pragma once

#include <cstdint>

namespace kolo::algorithms {

// Elements [begin, begin + count) of the buffer.
struct Range {
  int64_t begin = 0;
  int64_t count = 0;

  int64_t end() const { return begin + count; }
  bool operator==(const Range& o) const { return begin == o.begin && count == o.count; }
};

class RingSchedule {
 public:
  // rank in [0, size), size >= 1, count >= 0 (checked: a bad value is a bug).
  RingSchedule(int rank, int size, int64_t count);

  int rank() const { return rank_; }
  int size() const { return size_; }
  int64_t count() const { return count_; }

  // The peers: data flows from left to right around the ring.
  int left() const { return (rank_ + size_ - 1) % size_; }  // receive from rank-1
  int right() const { return (rank_ + 1) % size_; }         // send to rank+1

  // Steps in each phase (reduce-scatter, then allgather): size - 1.
  int steps() const { return size_ - 1; }

  // Chunk c in [0, size) of the buffer.
  Range chunk(int c) const;
  // The largest chunk's element count (the first chunk's).
  int64_t max_chunk_count() const;

  // Reduce-scatter, step s in [0, steps()): send the partial sum of chunk
  // (rank - s), receive chunk (rank - s - 1) and combine it with the local one.
  int reduce_scatter_send(int step) const { return wrap(rank_ - step); }
  int reduce_scatter_recv(int step) const { return wrap(rank_ - step - 1); }

  // After the reduce-scatter, this rank holds the full reduction of one chunk.
  int owned_chunk() const { return wrap(rank_ + 1); }

  // Allgather, step s in [0, steps()): forward the finished chunk (rank + 1 - s),
  // receive the finished chunk (rank - s).
  int allgather_send(int step) const { return wrap(rank_ + 1 - step); }
  int allgather_recv(int step) const { return wrap(rank_ - step); }

  // A chunk of `chunk_count` elements moves in segments of at most
  // `segment_elems` (>= 1) elements: how many, and which one is segment k.
  static int64_t num_segments(int64_t chunk_count, int64_t segment_elems);
  static Range segment(const Range& chunk, int64_t segment_elems, int64_t k);

 private:
  int wrap(int c) const { return ((c % size_) + size_) % size_; }

  int rank_;
  int size_;
  int64_t count_;
};

}  // namespace kolo::algorithms
