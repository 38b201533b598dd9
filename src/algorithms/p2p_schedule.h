// The index math of kolo's collectives over point-to-point verbs
// (p2p_collectives.h), and nothing else: pure functions of (rank, size, ...),
// kept apart from the I/O so that every world size can be checked exhaustively
// in milliseconds (tests/unit/algorithms/p2p_schedule_test.cc).
//
// Vocabulary: a *block* is one rank's run of elements in a rank-ordered layout
// (block b belongs to rank b); a *segment* is a piece of a block of at most S
// elements that travels as one message (RingSchedule::segment); a *step* is one
// round in which a rank receives from one peer and sends to one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace kolo::algorithms {

// displs[r] = counts[0] + ... + counts[r-1]; returns the total.
int64_t prefix_sums(const std::vector<int64_t>& counts, std::vector<int64_t>* displs);

// One pass of blocks around the ring (p2p_ring.cc): size-1 steps; rank r
// receives only from left (r-1) and sends only to right (r+1). At step 0 it
// sends block first_send() from its own data; at step s+1 it forwards the block
// it received at step s. `shift` says which blocks travel:
//   shift 0 (allgather): r sends its own block first and receives every other
//     block, the last one (at step size-2) being block r+1.
//   shift 1 (reduce-scatter): r sends block r-1 first, and the block it receives
//     last is its own, b = r: every block has then passed every rank once.
// Invariant (the test): at every step, what r sends is what r+1 receives.
struct RingPass {
  RingPass(int rank, int size, int shift);

  int left() const { return wrap(rank - 1); }
  int right() const { return wrap(rank + 1); }
  int steps() const { return size - 1; }
  int first_send() const { return wrap(rank - shift); }
  int recv_block(int step) const { return wrap(rank - step - 1 - shift); }
  int wrap(int b) const { return ((b % size) + size) % size; }

  int rank, size, shift;
};

// Broadcast: ranks renumbered relative to the root (v = 0 is the root).
int relative_rank(int rank, int root, int size);
int absolute_rank(int relative, int root, int size);

// The binomial tree on relative ranks 0..size-1: v's parent is v with its lowest
// set bit cleared; its children are v + 2^k for every 2^k below that bit (all of
// them below size, for the root), largest subtree first. A parent sends to its
// children one after the other; the last rank has the message after
// ceil(log2 size) such rounds.
int tree_parent(int v);  // v > 0
std::vector<int> tree_children(int v, int size);

// Whether a broadcast of `bytes` among `size` ranks goes down the pipelined
// chain (true) or the binomial tree, with chain segments of `segment_bytes`
// (Note [Tree or chain] in p2p_broadcast.cc): the chain when
// bytes * (ceil(log2 size) - 1) > (size - 2) * segment_bytes; never below 3 ranks.
bool broadcast_by_chain(size_t bytes, int size, size_t segment_bytes);

// Pairwise exchange (p2p_alltoall.cc), step k in 1..size-1: send to rank+k,
// receive from rank-k. Every ordered pair meets at exactly one step.
inline int pairwise_to(int rank, int size, int k) { return (rank + k) % size; }
inline int pairwise_from(int rank, int size, int k) { return ((rank - k) % size + size) % size; }

}  // namespace kolo::algorithms
