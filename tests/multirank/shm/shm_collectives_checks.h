// The shm collectives engine's multirank tests' shared pieces (transports/shm/
// collectives.h): engines on node layers of their own over the MPI test world,
// Options that reach each path, buffers on the heap or in kolo_alloc memory, and
// one exact check per collective. Include from tests/multirank/shm only.
#pragma once

#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "tests/multirank/mpi/allreduce_values.h"
#include "tests/multirank/mpi/collective_checks.h"
#include "tests/multirank/mpi/mpi_test_world.h"
#include "transports/shm/collectives.h"
#include "transports/shm/node.h"
#include "transports/shm/shared_alloc.h"

namespace kolo::shm::collectives_testing {

// The test helpers; rank(), size() and view_of() are collective_checks.h's.
using namespace mpi::testing;  // NOLINT
using transport::CollectiveView;

// Element i of what rank s hands rank d (allgather, alltoall: d = 0), exact in T.
template <typename T>
T value(int s, int d, int64_t i) {
  return Dtype<T>::from(input_value<T>(s, i + 7 * d, ReduceOp::kSum));
}

// Where a check's buffers live: the heap, or memory kolo hands out
// (shared_alloc.h), which the peers map (Note [The peers' sources in kolo
// memory]). A vector's allocator, so that each growth is a new allocation.
enum class Memory { kHeap, kKolo };

template <typename T>
struct Placed {
  using value_type = T;
  Memory where = Memory::kHeap;
  Placed() = default;
  explicit Placed(Memory m) : where(m) {}
  template <typename U>
  Placed(const Placed<U>& other) : where(other.where) {}  // NOLINT: as std::allocator
  T* allocate(size_t n) {
    if (where == Memory::kHeap) return std::allocator<T>().allocate(n);
    void* p = nullptr;
    Status s = shared_alloc(n * sizeof(T), &p);
    if (!s.ok()) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t n) {
    if (where == Memory::kHeap) return std::allocator<T>().deallocate(p, n);
    EXPECT_TRUE(shared_free(p).ok());
  }
  template <typename U>
  bool operator==(const Placed<U>& o) const { return where == o.where; }
  template <typename U>
  bool operator!=(const Placed<U>& o) const { return where != o.where; }
};
template <typename T>
using Buffer = std::vector<T, Placed<T>>;

template <typename T>
Buffer<T> placed(Memory where, const T* from, size_t n) {
  return Buffer<T>(from, from + n, Placed<T>(where));
}

// Bit for bit (memcmp must not see the null data() of an empty vector).
template <typename T>
bool same_bytes(const T* got, const std::vector<T>& want) {
  return want.empty() || std::memcmp(got, want.data(), want.size() * sizeof(T)) == 0;
}

// Runs `op` on the engine and expects it to succeed with `got` bit for bit `want`.
template <typename T>
void expect_exact(ShmCollectives& e, Collective op, const CollectiveView& v, const T* got,
                  const std::vector<T>& want) {
  Status s = e.run(op, v);
  EXPECT_TRUE(s.ok()) << s.to_string();
  EXPECT_TRUE(same_bytes(got, want));
}

// An engine with a `slot_bytes` slot and `options` on a node layer of its own
// (every rank is on this node). Collective over the world.
inline std::unique_ptr<ShmCollectives> engine(size_t slot_bytes,
                                              const ShmCollectives::Options& options = {},
                                              transport::Liveness* alive = nullptr) {
  NodeOptions regions;
  regions.collectives_slot_bytes = slot_bytes;
  std::shared_ptr<Node> node;
  Status s = Node::create(*test_world().control, regions, &node);
  EXPECT_TRUE(s.ok()) << s.to_string();
  std::unique_ptr<ShmCollectives> e;
  if (node) s = ShmCollectives::create(node, alive, options, &e);
  EXPECT_TRUE(s.ok()) << s.to_string();
  return e;
}

// Options that reach each path: outputs streamed at every size or never; slots
// written as told; single copy from 0 bytes (where the node allows it) or never;
// no one pass (one_pass() below asks for it).
inline ShmCollectives::Options with(size_t stream_output_from, ShmCollectives::SlotStores slots,
                                    size_t single_copy_from = SIZE_MAX) {
  ShmCollectives::Options o;
  o.one_pass_min_bytes = SIZE_MAX;
  o.stream_output_min_bytes = stream_output_from;
  o.broadcast_stream_output_min_bytes = stream_output_from;
  o.callers_stream_output_min_bytes = stream_output_from;
  o.slot_stores = slots;
  o.single_copy_min_bytes = single_copy_from;
  return o;
}

inline ShmCollectives::Options single_copy() {
  ShmCollectives::Options o;
  o.single_copy_min_bytes = 0;
  return o;
}

// Allgathers and alltoalls of every size in one pass (where the node allows it).
inline ShmCollectives::Options one_pass() {
  ShmCollectives::Options o;
  o.one_pass_min_bytes = 0;
  o.one_pass_max_bytes = SIZE_MAX;
  return o;
}

inline ShmCollectives::Options slots(ShmCollectives::SlotStores stores) {
  ShmCollectives::Options o;
  o.one_pass_min_bytes = SIZE_MAX;
  o.slot_stores = stores;
  return o;
}

// Rank r's row count: uneven, empty on some ranks (scaled by `base`).
inline int64_t rows(int r, int64_t base) { return (r % 3 == 1) ? 0 : base * (r + 1) + r; }

template <typename T>
void check_allgather(ShmCollectives& e, int64_t base, bool in_place,
                     Memory where = Memory::kHeap, bool callers_output = false) {
  SCOPED_TRACE("allgather base " + std::to_string(base) + (in_place ? " in place" : ""));
  std::vector<int64_t> counts;
  int64_t total = 0, mine_at = 0;
  for (int r = 0; r < size(); ++r) {
    if (r == rank()) mine_at = total;
    counts.push_back(rows(r, base));
    total += counts.back();
  }
  std::vector<T> want;
  Buffer<T> out(static_cast<size_t>(total), T(), Placed<T>(where));
  for (int r = 0; r < size(); ++r)
    for (int64_t i = 0; i < counts[r]; ++i) want.push_back(value<T>(r, 0, i));
  Buffer<T> in = placed(where, want.data() + mine_at, static_cast<size_t>(counts[rank()]));
  if (in_place) std::copy(in.begin(), in.end(), out.begin() + mine_at);
  CollectiveView v = view_of<T>(in_place ? out.data() + mine_at : in.data(), out.data());
  v.recv_counts = counts;
  v.callers_output = callers_output;
  expect_exact(e, Collective::kAllgather, v, out.data(), want);
}

template <typename T>
void check_broadcast(ShmCollectives& e, int64_t count, int root, bool in_place,
                     Memory where = Memory::kHeap) {
  SCOPED_TRACE("broadcast " + std::to_string(count) + " from " + std::to_string(root) +
               (in_place ? " in place" : ""));
  std::vector<T> want(static_cast<size_t>(count));
  Buffer<T> out(want.size(), Dtype<T>::from(1), Placed<T>(where));
  for (int64_t i = 0; i < count; ++i) want[i] = value<T>(root, 0, i);
  Buffer<T> in = placed(where, want.data(), want.size());
  if (rank() == root && in_place) std::copy(want.begin(), want.end(), out.begin());
  CollectiveView v = view_of<T>(rank() == root && !in_place ? in.data() : out.data(), out.data());
  v.count = count;
  v.root = root;
  expect_exact(e, Collective::kBroadcast, v, out.data(), want);
}

// Elements rank s sends rank d: uneven, some pairs empty.
inline int64_t pair(int s, int d, int64_t base) {
  return (s + 2 * d) % 4 == 1 ? 0 : base * (1 + (s + d) % 3) + s;
}

// With `total`, the view carries the node's total, as the executor's does
// (Note [One pass from the peers' inputs] reads it); without, -1.
template <typename T>
void check_alltoall(ShmCollectives& e, int64_t base, bool total = true,
                    Memory where = Memory::kHeap) {
  SCOPED_TRACE("alltoall base " + std::to_string(base) + (total ? "" : " without a total"));
  CollectiveView v = view_of<T>(nullptr, nullptr);
  v.alltoall_total = total ? 0 : -1;
  for (int s = 0; total && s < size(); ++s)
    for (int d = 0; d < size(); ++d) v.alltoall_total += pair(s, d, base);
  Buffer<T> in{Placed<T>(where)};
  std::vector<T> want;
  for (int d = 0; d < size(); ++d) {
    v.send_counts.push_back(pair(rank(), d, base));
    for (int64_t i = 0; i < v.send_counts.back(); ++i) in.push_back(value<T>(rank(), d, i));
    v.recv_counts.push_back(pair(d, rank(), base));
    for (int64_t i = 0; i < v.recv_counts.back(); ++i) want.push_back(value<T>(d, rank(), i));
  }
  Buffer<T> out(want.size(), T(), Placed<T>(where));
  v.input = in.data();
  v.output = out.data();
  expect_exact(e, Collective::kAlltoall, v, out.data(), want);
}

template <typename T>
void check_reducescatter(ShmCollectives& e, int64_t base, ReduceOp op, bool in_place,
                         Memory where = Memory::kHeap) {
  SCOPED_TRACE("reducescatter base " + std::to_string(base) + " " + op_name(op) +
               (in_place ? " in place" : ""));
  CollectiveView v = view_of<T>(nullptr, nullptr);
  int64_t total = 0, mine_at = 0;
  for (int r = 0; r < size(); ++r) {
    if (r == rank()) mine_at = total;
    v.recv_counts.push_back(rows(r, base));
    total += v.recv_counts.back();
  }
  v.reduction.op = op;
  const std::vector<T> from = inputs<T>(rank(), total, op);
  Buffer<T> in = placed(where, from.data(), from.size());
  const std::vector<T> all = expected<T>(size(), total, op);
  std::vector<T> want(all.begin() + mine_at, all.begin() + mine_at + v.recv_counts[rank()]);
  Buffer<T> out(want.size(), T(), Placed<T>(where));
  v.input = in.data();
  v.output = in_place ? static_cast<void*>(in.data()) : out.data();
  expect_exact(e, Collective::kReducescatter, v, in_place ? in.data() : out.data(), want);
}

}  // namespace kolo::shm::collectives_testing
