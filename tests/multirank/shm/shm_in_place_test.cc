// The shm allreduce from the peers' buffers in place (Note [Reading a peer's
// buffer in place] in transports/shm/allreduce_in_place.cc), under mpiexec on one
// node: buffers from kolo_alloc on every rank take it, and give bitwise the
// bytes the slots give (in rank order, or at 2 ranks; past that the same bytes
// on every rank), in place and out of place, with an output factor; a bucket
// below the threshold, a fused bucket with a small tensor, or one rank's heap
// buffer keep the slots, with the right result (the first slice of the last read
// from the others' inputs); a fused bucket of large tensors
// goes tensor by tensor; freed and new allocations between calls are never read
// through a stale mapping.
#include <gtest/gtest.h>
#include <mpi.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "tests/multirank/mpi/mpi_test_world.h"
#include "transports/shm/allreduce.h"
#include "transports/shm/node.h"
#include "transports/shm/shared_alloc.h"

namespace kolo::shm {
namespace {

using namespace mpi::testing;  // NOLINT: the test helpers

int rank() { return test_world().control->topology().rank; }
int size() { return test_world().control->topology().size; }

std::unique_ptr<ShmAllreduce> engine() {
  NodeOptions options;
  options.allreduce_slot_bytes = ShmAllreduce::kDefaultSlotBytes;
  std::shared_ptr<Node> node;
  Status s = Node::create(*test_world().control, options, &node);
  EXPECT_TRUE(s.ok()) << s.to_string();
  std::unique_ptr<ShmAllreduce> out;
  if (node) {
    EXPECT_TRUE(ShmAllreduce::create(node, nullptr, {}, &out).ok());
  }
  return out;
}

// `count` elements of T from kolo_alloc's memory (shared_alloc) or the heap,
// freed on destruction.
template <typename T>
class Memory {
 public:
  Memory(int64_t count, bool from_kolo) : count_(count), from_kolo_(from_kolo) {
    const size_t bytes = static_cast<size_t>(count) * sizeof(T);
    void* p = nullptr;
    if (from_kolo) {
      Status s = shared_alloc(bytes, &p);
      EXPECT_TRUE(s.ok()) << s.to_string();
    } else {
      heap_.resize(static_cast<size_t>(count));
      p = heap_.data();
    }
    data_ = static_cast<T*>(p);
  }
  ~Memory() {
    if (from_kolo_) {
      EXPECT_TRUE(shared_free(data_).ok());
    }
  }
  T* data() const { return data_; }
  std::vector<T> copy() const { return std::vector<T>(data_, data_ + count_); }
  void fill(const std::vector<T>& v) { std::memcpy(data_, v.data(), v.size() * sizeof(T)); }

 private:
  int64_t count_;
  bool from_kolo_;
  std::vector<T> heap_;
  T* data_ = nullptr;
};

// Floats whose sum depends on the order they are added in, different per rank.
std::vector<float> floats(int64_t count, int seed) {
  std::mt19937 gen(static_cast<unsigned>(1000 + seed));
  std::uniform_real_distribution<float> d(-1000.0f, 1000.0f);
  std::vector<float> v(static_cast<size_t>(count));
  for (float& x : v) x = d(gen) * (gen() % 2 ? 1e-3f : 1.0f);
  return v;
}

struct Case {
  int64_t count;
  bool in_place;
  bool in_rank_order;
};

// One float SUM through `e`, from `from_kolo` memory; the output's bytes.
std::vector<float> reduce(ShmAllreduce& e, const Case& c, bool from_kolo,
                          const ShmShardStage& stage = {}) {
  const std::vector<float> mine = floats(c.count, rank());
  Memory<float> in(c.count, from_kolo), out(c.count, from_kolo);
  in.fill(mine);
  float* output = c.in_place ? in.data() : out.data();
  Status s = e.run(in.data(), output, c.count, DataType::kFloat32, ReduceOp::kSum, stage, 1.0,
                   c.in_rank_order);
  EXPECT_TRUE(s.ok()) << s.to_string();
  if (!c.in_place) {
    EXPECT_EQ(std::memcmp(in.data(), mine.data(), mine.size() * 4), 0) << "input changed";
  }
  return c.in_place ? in.copy() : out.copy();
}

// Past 2 ranks and not in rank order, an element's bits depend on which rank
// reduced it (its own input first), as they depend on the slots' slice size:
// every rank must still hold the same bytes, within rounding of the slots'.
void expect_alike_everywhere_and_near(const std::vector<float>& got, const std::vector<float>& near) {
  uint64_t hash = 1469598103934665603ull;
  for (size_t i = 0; i < got.size() * 4; ++i) {
    hash = (hash ^ reinterpret_cast<const unsigned char*>(got.data())[i]) * 1099511628211ull;
  }
  std::vector<uint64_t> all(static_cast<size_t>(size()));
  MPI_Allgather(&hash, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD);
  for (int r = 1; r < size(); ++r) EXPECT_EQ(all[static_cast<size_t>(r)], all[0]) << "rank " << r;
  int64_t far = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::fabs(got[i] - near[i]) > 1e-3f * (1.0f + std::fabs(near[i]))) ++far;
  }
  EXPECT_EQ(far, 0);
}

const int64_t kAtThreshold = static_cast<int64_t>(ShmAllreduce::kInPlaceMinBytes / 4);

// `c` through the slots (heap) and then from kolo memory (read in place): the
// same bytes at 2 ranks and in rank order, else alike everywhere and near.
void expect_the_slots_bytes(ShmAllreduce& e, const Case& c) {
  const std::vector<float> slots = reduce(e, c, false);
  EXPECT_FALSE(e.read_in_place());
  const std::vector<float> mapped = reduce(e, c, true);
  EXPECT_EQ(e.read_in_place(), size() > 1);
  if (c.in_rank_order || size() <= 2) {
    EXPECT_EQ(std::memcmp(slots.data(), mapped.data(), slots.size() * 4), 0);
  } else {
    expect_alike_everywhere_and_near(mapped, slots);
  }
}

TEST(ShmInPlace, KoloMemoryGivesTheSlotsBytes) {
  std::unique_ptr<ShmAllreduce> e = engine();
  ASSERT_NE(e, nullptr);
  for (int64_t count : {kAtThreshold, 3 * kAtThreshold + 5}) {
    for (bool in_place : {true, false}) {
      for (bool in_rank_order : {false, true}) {
        const Case c{count, in_place, in_rank_order};
        SCOPED_TRACE("count " + std::to_string(count) + (in_place ? " in place" : " out of place") +
                     (in_rank_order ? " rank order" : ""));
        expect_the_slots_bytes(*e, c);
      }
    }
  }
}

// Large enough for streamed outputs (kStreamOutputMinBytes), with the even
// ranks in place and the odd ones not: each destination gets plain or
// streaming stores as its rank's description says (Note [Plain stores into a
// buffer just read]); the bytes are the slots' either way.
TEST(ShmInPlace, RanksInPlaceAndNotBeside) {
  std::unique_ptr<ShmAllreduce> e = engine();
  ASSERT_NE(e, nullptr);
  const int64_t count = static_cast<int64_t>(ShmAllreduce::kStreamOutputMinBytes / 4) + 3;
  for (bool in_rank_order : {false, true}) {
    const Case c{count, rank() % 2 == 0, in_rank_order};
    SCOPED_TRACE(in_rank_order ? "rank order" : "own input first");
    expect_the_slots_bytes(*e, c);
  }
}

TEST(ShmInPlace, OutputFactorOnTheWay) {
  std::unique_ptr<ShmAllreduce> e = engine();
  ASSERT_NE(e, nullptr);
  ShmShardStage quarter;
  quarter.per_element = true;
  quarter.apply = [](void* p, int64_t n) {
    for (int64_t i = 0; i < n; ++i) static_cast<float*>(p)[i] *= 0.25f;
    return Status::OK();
  };
  const Case c{kAtThreshold + 17, true, true};  // rank order: the bits are fixed
  const std::vector<float> slots = reduce(*e, c, false, quarter);
  const std::vector<float> mapped = reduce(*e, c, true, quarter);
  EXPECT_EQ(e->read_in_place(), size() > 1);
  EXPECT_EQ(std::memcmp(slots.data(), mapped.data(), slots.size() * 4), 0);
  const std::vector<float> unscaled = reduce(*e, c, true);
  for (size_t i = 0; i < unscaled.size(); i += 4099) ASSERT_EQ(mapped[i], unscaled[i] * 0.25f) << i;
}

// Exact integer sums, so that a wrong path shows as a wrong value, not only as
// a difference from the slots.
void check_ints(ShmAllreduce& e, int64_t count, bool from_kolo, int seed) {
  Memory<int32_t> buf(count, from_kolo);
  std::vector<int32_t> v(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) v[i] = static_cast<int32_t>((rank() + 1) * (i % 1000) + seed);
  buf.fill(v);
  ASSERT_TRUE(e.run(buf.data(), buf.data(), count, DataType::kInt32, ReduceOp::kSum).ok());
  const int32_t ranks = size() * (size() + 1) / 2;
  int64_t wrong = 0, first = -1;
  for (int64_t i = 0; i < count; ++i) {
    if (buf.data()[i] == ranks * static_cast<int32_t>(i % 1000) + size() * seed) continue;
    if (wrong++ == 0) first = i;
  }
  EXPECT_EQ(wrong, 0) << "first wrong element " << first;
}

TEST(ShmInPlace, AnyRankOnTheHeapKeepsTheSlots) {
  std::unique_ptr<ShmAllreduce> e = engine();
  ASSERT_NE(e, nullptr);
  for (int heap_rank = 0; heap_rank < size(); ++heap_rank) {
    check_ints(*e, 2 * kAtThreshold, rank() != heap_rank, heap_rank);
    EXPECT_FALSE(e->read_in_place()) << "local rank " << heap_rank << " on the heap";
  }
  check_ints(*e, kAtThreshold, true, 6);
  EXPECT_EQ(e->read_in_place(), size() > 1);
  check_ints(*e, kAtThreshold - 1, true, 7);  // below the threshold
  EXPECT_FALSE(e->read_in_place());
  check_ints(*e, kAtThreshold, true, 8);
  check_ints(*e, 1000, true, 9);  // a small bucket (one round)
  EXPECT_FALSE(e->read_in_place());
}

// Note [A described slice skips the slot]: with one rank's buffers on the heap,
// the ranks in kolo memory post the first slice's description alone and the
// others read that slice from their inputs; the later slices go through the
// slots. Over three slices, in place and not, in either order of reduction, the
// bytes are those of the call with every rank on the heap.
TEST(ShmInPlace, FirstSliceFromTheInputsOfTheRanksInKoloMemory) {
  std::unique_ptr<ShmAllreduce> e = engine();
  ASSERT_NE(e, nullptr);
  const int64_t count = static_cast<int64_t>(5 * e->slice_bytes() / 2 / 4) + 7;
  for (int heap_rank = 0; heap_rank < size(); ++heap_rank) {
    for (bool in_place : {true, false}) {
      for (bool in_rank_order : {false, true}) {
        const Case c{count, in_place, in_rank_order};
        SCOPED_TRACE("local rank " + std::to_string(heap_rank) + " on the heap," +
                     (in_place ? " in place" : " out of place") + (in_rank_order ? ", rank order" : ""));
        const std::vector<float> slots = reduce(*e, c, false);
        const std::vector<float> mixed = reduce(*e, c, rank() != heap_rank);
        EXPECT_FALSE(e->read_in_place());
        if (in_rank_order || size() <= 2) {
          EXPECT_EQ(std::memcmp(slots.data(), mixed.data(), slots.size() * 4), 0);
        } else {
          expect_alike_everywhere_and_near(mixed, slots);
        }
      }
    }
    check_ints(*e, count, rank() != heap_rank, heap_rank);
  }
}

// Note [A described slice skips the slot], failing: rank 0's buffer is in kolo
// memory and the others' on the heap, and the others cannot map rank 0's input
// (their address space is capped just above what they use, so the mapping's
// mmap fails). They mark their descriptions broken; rank 0, which posted its
// first slice's description alone, must fail the call too rather than read
// their slots, and nobody waits forever. (Sanitizers reserve address space of
// their own: skipped under them.)
TEST(ShmInPlace, PeersThatCannotMapADescribedInputFailEveryRank) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "the address-space cap conflicts with the sanitizer's reservations";
#endif
  if (size() < 2) GTEST_SKIP() << "needs peers";
  std::unique_ptr<ShmAllreduce> e = engine();
  ASSERT_NE(e, nullptr);
  const int64_t count = int64_t{1} << 18;  // 1 MiB of int32: two slices
  Memory<int32_t> buf(count, rank() == 0);
  buf.fill(std::vector<int32_t>(static_cast<size_t>(count), rank() + 1));
  rlimit before{};
  ASSERT_EQ(getrlimit(RLIMIT_AS, &before), 0);
  if (rank() != 0) {
    long pages = 0;
    std::FILE* statm = std::fopen("/proc/self/statm", "r");
    ASSERT_NE(statm, nullptr);
    ASSERT_EQ(std::fscanf(statm, "%ld", &pages), 1);
    std::fclose(statm);
    rlimit capped = before;
    capped.rlim_cur = static_cast<rlim_t>(pages) * static_cast<rlim_t>(sysconf(_SC_PAGESIZE)) +
                      (rlim_t{256} << 10);  // room for small allocations, not for 1 MiB
    ASSERT_EQ(setrlimit(RLIMIT_AS, &capped), 0);
  }
  const Status s = e->run(buf.data(), buf.data(), count, DataType::kInt32, ReduceOp::kSum);
  ASSERT_EQ(setrlimit(RLIMIT_AS, &before), 0);
  EXPECT_FALSE(s.ok()) << "local rank " << rank() << " finished a call its peers could not read";
  if (rank() == 0) {
    EXPECT_NE(s.message().find("could not map"), std::string::npos) << s.message();
  } else {
    EXPECT_NE(s.message().find("mapping a peer's kolo_alloc memory"), std::string::npos)
        << s.message();
  }
}

// New allocations between calls (freed ones' fd numbers reused): each call
// reads the peers' current buffers, never a mapping of a freed one.
TEST(ShmInPlace, FreedAndNewAllocationsBetweenCalls) {
  std::unique_ptr<ShmAllreduce> e = engine();
  ASSERT_NE(e, nullptr);
  for (int seed = 0; seed < 6; ++seed) {
    check_ints(*e, kAtThreshold + 64 * seed, true, seed);
    EXPECT_EQ(e->read_in_place(), size() > 1);
    if (seed % 2) check_ints(*e, 4096, true, seed);  // the slots between, counters in step
  }
}

// A fused bucket of large tensors goes tensor by tensor, each in place; with a
// tensor below the threshold the bucket keeps the slots. Exact either way.
TEST(ShmInPlace, FusedBuckets) {
  std::unique_ptr<ShmAllreduce> e = engine();
  ASSERT_NE(e, nullptr);
  for (int64_t second : {kAtThreshold + 3, kAtThreshold - 1}) {
    SCOPED_TRACE("second tensor " + std::to_string(second));
    Memory<int32_t> a(kAtThreshold, true), b(second, true);
    a.fill(std::vector<int32_t>(static_cast<size_t>(kAtThreshold), rank() + 1));
    b.fill(std::vector<int32_t>(static_cast<size_t>(second), 2 * rank()));
    std::vector<transport::BucketTensor> both{{a.data(), a.data(), kAtThreshold, nullptr},
                                              {b.data(), b.data(), second, nullptr}};
    ASSERT_TRUE(e->run(both, DataType::kInt32, ReduceOp::kSum).ok());
    EXPECT_EQ(e->read_in_place(), second >= kAtThreshold && size() > 1);
    EXPECT_EQ(a.data()[0], size() * (size() + 1) / 2);
    EXPECT_EQ(a.data()[kAtThreshold - 1], size() * (size() + 1) / 2);
    EXPECT_EQ(b.data()[0], size() * (size() - 1));
    EXPECT_EQ(b.data()[second - 1], size() * (size() - 1));
  }
}

}  // namespace
}  // namespace kolo::shm
