// Checks of the collectives other than allreduce, shared by the tests of every
// transport that runs them ("mpi" in mpi_collectives_test, "hierarchical" across
// hosts in tests/multihost): a transport runs one collective with values that name
// their origin, and a check returns the number of wrong elements. Values are small
// integers, exact in every dtype, so results compare with ==. Every rank must make
// the same calls in the same order (the checks EXPECT, never return early).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "common/dtype.h"
#include "tests/multirank/mpi/allreduce_values.h"
#include "tests/multirank/mpi/mpi_test_world.h"
#include "transport/transport.h"

namespace kolo::mpi::testing {

using transport::CollectiveView;

inline int rank() { return test_world().control->topology().rank; }
inline int size() { return test_world().control->topology().size; }

// A value that names its origin: rank `from`, destination `to`, element k.
template <typename T>
double tag(int from, int to, int64_t k) {
  if (Dtype<T>::kValue == DataType::kBool) return (from + to + k) % 2;
  const double v = static_cast<double>((from * 7 + to * 5 + k * 3) % 23);
  return is_signed_dtype<T>() ? v - 11 : v;
}

// Rank r's element i of a reducescatter input. Sums over 4 ranks stay within
// [-20, 40]; products of {1, 2, -1} within 16: exact everywhere, no overflow.
template <typename T>
double reduce_input(int r, int64_t i, ReduceOp op) {
  if (Dtype<T>::kValue == DataType::kBool) return (i + r) % 3 == 0 ? 1 : 0;
  if (op == ReduceOp::kProduct) {
    const int k = static_cast<int>((i + r) % 3);
    return k == 0 ? 1 : k == 1 ? 2 : (is_signed_dtype<T>() ? -1 : 1);
  }
  const double v = static_cast<double>((i * 7 + r * 3) % 11);
  return is_signed_dtype<T>() ? v - 5 : v;
}

// The reduction over all ranks of element i (bool: SUM/MAX = or, MIN/PRODUCT = and).
template <typename T>
double reduced(int64_t i, ReduceOp op) {
  double acc = reduce_input<T>(0, i, op);
  const bool boolean = Dtype<T>::kValue == DataType::kBool;
  for (int r = 1; r < size(); ++r) {
    const double v = reduce_input<T>(r, i, op);
    if (op == ReduceOp::kSum && !boolean) acc += v;
    if (op == ReduceOp::kProduct && !boolean) acc *= v;
    if (op == ReduceOp::kMin || (boolean && op == ReduceOp::kProduct)) acc = std::min(acc, v);
    if (op == ReduceOp::kMax || (boolean && op == ReduceOp::kSum)) acc = std::max(acc, v);
  }
  return acc;
}

inline Status run(transport::Transport& t, Collective op, const CollectiveView& v) {
  Status supported = t.supports_collective(op, v);
  if (!supported.ok()) return supported;
  return t.collective(op, v)->wait();
}

template <typename T>
CollectiveView view_of(const void* input, void* output) {
  CollectiveView v;
  v.input = input;
  v.output = output;
  v.dtype = Dtype<T>::kValue;
  return v;
}

// Rank r's allgather contribution under pattern p.
inline int64_t gather_count(int pattern, int r) {
  switch (pattern) {
    case 0: return 0;               // nobody sends
    case 1: return 1;               // one each
    case 2: return (r * 3) % 4;     // rank 0 sends nothing, the others differ
    default: return 5000 + 37 * r;  // large and different
  }
}

// Elements rank s sends to rank d under pattern p.
inline int64_t pair_count(int pattern, int s, int d) {
  switch (pattern) {
    case 0: return 0;
    case 1: return (s + 2 * d) % 4;  // zero on some pairs
    default: return 1000 + 13 * s + 7 * d;
  }
}

// Horovod's shards: the first total % size ranks get one more element.
inline std::vector<int64_t> shards(int64_t total, int n) {
  std::vector<int64_t> counts;
  for (int r = 0; r < n; ++r) counts.push_back(total / n + (r < total % n ? 1 : 0));
  return counts;
}

// Allgather of gather_count(pattern, r) elements per rank; in place: each rank's
// input is its own block of the output. Returns the number of wrong elements.
template <typename T>
int64_t check_allgather(transport::Transport& t, int pattern, bool in_place) {
  CollectiveView v = view_of<T>(nullptr, nullptr);
  int64_t total = 0, mine = 0;
  for (int r = 0; r < size(); ++r) {
    if (r == rank()) mine = total;
    v.recv_counts.push_back(gather_count(pattern, r));
    total += v.recv_counts.back();
  }
  std::vector<T> out(total, Dtype<T>::from(9)), in(v.recv_counts[rank()]);
  for (size_t k = 0; k < in.size(); ++k) in[k] = Dtype<T>::from(tag<T>(rank(), 0, k));
  if (in_place) std::copy(in.begin(), in.end(), out.begin() + mine);
  v.input = in_place ? out.data() + mine : in.data();
  v.output = out.data();
  Status s = run(t, Collective::kAllgather, v);
  EXPECT_TRUE(s.ok()) << s.to_string();
  int64_t wrong = 0, at = 0;
  for (int r = 0; r < size(); ++r) {
    for (int64_t k = 0; k < v.recv_counts[r]; ++k, ++at)
      wrong += Dtype<T>::to(out[at]) != tag<T>(r, 0, k);
  }
  return wrong;
}

template <typename T>
int64_t check_broadcast(transport::Transport& t, int root, int64_t count, bool in_place) {
  std::vector<T> out(count, Dtype<T>::from(9)), in(count, Dtype<T>::from(8));
  std::vector<T>& source = in_place ? out : in;
  if (rank() == root) {
    for (int64_t k = 0; k < count; ++k) source[k] = Dtype<T>::from(tag<T>(root, 0, k));
  }
  CollectiveView v = view_of<T>(source.data(), out.data());
  v.count = count;
  v.root = root;
  Status s = run(t, Collective::kBroadcast, v);
  EXPECT_TRUE(s.ok()) << s.to_string();
  int64_t wrong = 0;
  for (int64_t k = 0; k < count; ++k) wrong += Dtype<T>::to(out[k]) != tag<T>(root, 0, k);
  return wrong;
}

template <typename T, typename Counts>
int64_t check_alltoall(transport::Transport& t, Counts counts) {
  CollectiveView v = view_of<T>(nullptr, nullptr);
  std::vector<T> in, out;
  for (int peer = 0; peer < size(); ++peer) {
    v.send_counts.push_back(counts(rank(), peer));
    v.recv_counts.push_back(counts(peer, rank()));
    for (int64_t k = 0; k < v.send_counts.back(); ++k)
      in.push_back(Dtype<T>::from(tag<T>(rank(), peer, k)));
    out.resize(out.size() + v.recv_counts.back(), Dtype<T>::from(9));
  }
  v.input = in.data();
  v.output = out.data();
  Status s = run(t, Collective::kAlltoall, v);
  EXPECT_TRUE(s.ok()) << s.to_string();
  int64_t wrong = 0;
  size_t at = 0;
  for (int src = 0; src < size(); ++src) {
    for (int64_t k = 0; k < v.recv_counts[src]; ++k, ++at)
      wrong += Dtype<T>::to(out[at]) != tag<T>(src, rank(), k);
  }
  return wrong;
}

template <typename T>
int64_t check_reducescatter(transport::Transport& t, ReduceOp op, int64_t total, bool in_place) {
  std::vector<T> in(total);
  for (int64_t i = 0; i < total; ++i) in[i] = Dtype<T>::from(reduce_input<T>(rank(), i, op));
  CollectiveView v = view_of<T>(in.data(), in.data());
  v.reduction.op = op;
  v.recv_counts = shards(total, size());
  std::vector<T> out(v.recv_counts[rank()], Dtype<T>::from(9));
  if (!in_place) v.output = out.data();
  Status s = run(t, Collective::kReducescatter, v);
  EXPECT_TRUE(s.ok()) << s.to_string();
  const T* result = in_place ? in.data() : out.data();
  int64_t first = 0, wrong = 0;
  for (int r = 0; r < rank(); ++r) first += v.recv_counts[r];
  for (int64_t k = 0; k < v.recv_counts[rank()]; ++k)
    wrong += Dtype<T>::to(result[k]) != reduced<T>(first + k, op);
  return wrong;
}

}  // namespace kolo::mpi::testing
