#include "algorithms/p2p_schedule.h"

#include "common/check.h"

namespace kolo::algorithms {

int64_t prefix_sums(const std::vector<int64_t>& counts, std::vector<int64_t>* displs) {
  displs->resize(counts.size());
  int64_t total = 0;
  for (size_t r = 0; r < counts.size(); ++r) {
    (*displs)[r] = total;
    total += counts[r];
  }
  return total;
}

RingPass::RingPass(int rank, int size, int shift) : rank(rank), size(size), shift(shift) {
  KOLO_CHECK_GE(size, 1);
  KOLO_CHECK_GE(rank, 0);
  KOLO_CHECK_LT(rank, size);
}

int relative_rank(int rank, int root, int size) { return ((rank - root) % size + size) % size; }

int absolute_rank(int relative, int root, int size) { return (relative + root) % size; }

int tree_parent(int v) {
  KOLO_CHECK_GE(v, 1);
  return v & (v - 1);
}

std::vector<int> tree_children(int v, int size) {
  int below = 1;  // the lowest set bit of v, or the first power of two >= size for the root
  if (v == 0) {
    while (below < size) below <<= 1;
  } else {
    below = v & -v;
  }
  std::vector<int> children;
  for (int m = below >> 1; m >= 1; m >>= 1) {
    if (v + m < size) children.push_back(v + m);
  }
  return children;
}

bool broadcast_by_chain(size_t bytes, int size, size_t segment_bytes) {
  if (size < 3) return false;
  int rounds = 0;
  while ((1 << rounds) < size) ++rounds;
  // In long double: bytes * rounds may not fit 64 bits for huge messages.
  return static_cast<long double>(bytes) * (rounds - 1) >
         static_cast<long double>(size - 2) * static_cast<long double>(segment_bytes);
}

}  // namespace kolo::algorithms
