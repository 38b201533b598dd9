// The shm collectives engine from kolo_alloc memory (Note [The peers' sources in
// kolo memory] in transports/shm/collectives_choices.cc) under mpiexec on one
// node: every collective reads the peers' buffers mapped when every rank's
// source lies in such memory, and keeps the slots otherwise; exact either way;
// a freed and reallocated source is never read through a stale mapping.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tests/multirank/shm/shm_collectives_checks.h"

namespace kolo::shm {
namespace {

using namespace collectives_testing;  // NOLINT: the checks (shm_collectives_checks.h)
using namespace mpi::testing;         // NOLINT: the test helpers
using transport::CollectiveView;

// Note [The peers' sources in kolo memory]: when every rank's buffers come
// from kolo_alloc, calls whose largest block has 16 KiB or more read the peers'
// buffers mapped, in one round, where through the 1 MiB slots they take more.
// With one rank's buffers on the heap (each rank in turn) an allgather or a
// reducescatter still takes one round when another rank's source lies in kolo
// memory (that rank posts its header alone, Note [A mapped source skips the
// slot], and the heap rank is read with one copy); an alltoall keeps the slots
// and a broadcast reads its root only. An in-place reducescatter reads a
// private copy of its input (heap) unless its own block is empty (rows()).
// Exact every way; every vector is a new allocation, so the
// mappings follow the owners' frees. Inside the one-pass window the mapped
// peers are read too (one round either way). The in-place broadcast from rank
// 0 is the one whose root writes the last share of every receiver's output
// that lies in kolo memory (Note [The root writes a share]); a receiver on the
// heap copies all of its own, and the out-of-place root writes no share.
TEST(ShmCollectives, KoloMemorySourcesAreReadMapped) {
  ShmCollectives::Options o;
  o.one_pass_min_bytes = SIZE_MAX;  // the slots, unless mapped
  std::unique_ptr<ShmCollectives> e = engine(ShmCollectives::kDefaultSlotBytes, o);
  std::unique_ptr<ShmCollectives> once = engine(ShmCollectives::kDefaultSlotBytes, one_pass());
  ASSERT_TRUE(e && once);
  if (!e->single_copy()) GTEST_SKIP() << "this node does not allow single copy";
  for (int heap_rank = -1; heap_rank < size(); ++heap_rank) {
    SCOPED_TRACE("heap on rank " + std::to_string(heap_rank));
    const Memory where = rank() == heap_rank ? Memory::kHeap : Memory::kKolo;
    const bool all_kolo = heap_rank < 0;
    const int last = size() - 1;
    int call = 0;
    auto expect = [&](bool mapped, auto&& run) {
      const uint64_t before = e->rounds_run();
      run();
      const uint64_t rounds = e->rounds_run() - before;
      if (mapped)
        EXPECT_EQ(rounds, 1u) << "call " << call;
      else
        EXPECT_GT(rounds, 1u) << "call " << call;
      ++call;
    };
    // Whether a rank other than the heap one has a source in kolo memory.
    auto kolo_source = [&](auto&& has_source) {
      for (int r = 0; r < size(); ++r)
        if (r != heap_rank && has_source(r)) return true;
      return false;
    };
    const bool gather_mapped = kolo_source([](int r) { return rows(r, 1) > 0; });
    const bool scatter_mapped = kolo_source([](int) { return true; });
    const bool in_place_scatter_mapped = kolo_source([](int r) { return rows(r, 1) == 0; });
    expect(gather_mapped, [&] { check_allgather<float>(*e, 300007, false, where); });
    expect(gather_mapped, [&] { check_allgather<int16_t>(*e, 600001, true, where); });
    expect(all_kolo, [&] { check_alltoall<int32_t>(*e, 200003, true, where); });
    expect(scatter_mapped,
           [&] { check_reducescatter<double>(*e, 150001, ReduceOp::kSum, false, where); });
    expect(in_place_scatter_mapped,
           [&] { check_reducescatter<float>(*e, 300007, ReduceOp::kMax, true, where); });
    expect(heap_rank != last,
           [&] { check_broadcast<uint8_t>(*e, (3 << 20) + 5, last, false, where); });
    expect(heap_rank != 0, [&] { check_broadcast<int64_t>(*e, (1 << 19) + 3, 0, true, where); });
    check_allgather<float>(*once, 100003, false, where);
    check_alltoall<double>(*once, 50001, true, where);
  }
}

// Note [An allgather pushes its block]: with the push from every size, each
// rank writes its block into every peer's output that lies in kolo memory, and
// a rank whose output is on the heap (each rank in turn) pulls every block
// itself; exact either way, in place and out of place, uneven blocks (some
// empty: rows()) included, in one round.
TEST(ShmCollectives, AllgatherPushesIntoKoloMemoryOutputs) {
  ShmCollectives::Options o;
  o.allgather_push_min_bytes = 0;
  o.one_pass_min_bytes = SIZE_MAX;
  std::unique_ptr<ShmCollectives> e = engine(ShmCollectives::kDefaultSlotBytes, o);
  ASSERT_NE(e, nullptr);
  if (!e->single_copy()) GTEST_SKIP() << "this node does not allow single copy";
  for (int heap_rank = -1; heap_rank < size(); ++heap_rank) {
    SCOPED_TRACE("heap on rank " + std::to_string(heap_rank));
    const Memory where = rank() == heap_rank ? Memory::kHeap : Memory::kKolo;
    for (bool in_place : {false, true}) {
      const uint64_t before = e->rounds_run();
      check_allgather<int32_t>(*e, 70001, in_place, where);
      EXPECT_EQ(e->rounds_run() - before, 1u) << (in_place ? "in place" : "out of place");
    }
  }
}

// A peer frees its input and allocates the next one of the same size (the
// same fd number, likely): a rank that kept the old mapping would read the old
// bytes (Note [The peers' sources in kolo memory]; shared_alloc.h's epoch).
TEST(ShmCollectives, KoloMemoryFreedBetweenCallsIsNotReadStale) {
  std::unique_ptr<ShmCollectives> e = engine(ShmCollectives::kDefaultSlotBytes);
  ASSERT_NE(e, nullptr);
  const int64_t count = 400000;  // 1.6 MB a rank
  std::vector<int32_t> out(static_cast<size_t>(count * size()));
  for (int call = 0; call < 4; ++call) {
    void* in = nullptr;
    ASSERT_TRUE(shared_alloc(static_cast<size_t>(count) * sizeof(int32_t), &in).ok());
    int32_t* mine = static_cast<int32_t*>(in);
    auto want = [&](int r, int64_t i) { return 1000 * call + r + static_cast<int32_t>(i % 7); };
    for (int64_t i = 0; i < count; ++i) mine[i] = want(rank(), i);
    CollectiveView v = view_of<int32_t>(in, out.data());
    v.recv_counts.assign(static_cast<size_t>(size()), count);
    Status s = e->run(Collective::kAllgather, v);
    EXPECT_TRUE(s.ok()) << s.to_string();
    int64_t wrong = 0;
    for (int r = 0; r < size(); ++r)
      for (int64_t i = 0; i < count; ++i)
        wrong += out[static_cast<size_t>(r * count + i)] != want(r, i);
    EXPECT_EQ(wrong, 0) << "call " << call;
    ASSERT_TRUE(shared_free(in).ok());
  }
}

}  // namespace
}  // namespace kolo::shm
