// kolo_alloc / kolo_free through the C API under mpiexec -n 2, 3, 4: bad
// arguments are refused by name; allreduces of 1 MiB and more from such memory
// (which the shm transport reads from the peers' buffers in place) give the
// exact results, in place and out of place, with buffers freed and allocated
// anew between calls, and beside heap buffers on other ranks; so do allgathers,
// broadcasts, alltoalls and reducescatters of 1 MiB and more, whose peers the
// shm transport reads mapped (Note [The peers' sources in kolo memory]), and
// allgathers large enough that kolo's own outputs come from such memory.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "api_fixture.h"

namespace kolo_test {
namespace {

const ::testing::Environment* const kMpi = ::testing::AddGlobalTestEnvironment(new MpiEnvironment);

TEST(KoloMemory, BadArgumentsAreRefusedByName) {
  void* p = nullptr;
  EXPECT_EQ(kolo_alloc(0, &p), KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kolo_last_error()).find("0 bytes"), std::string::npos) << kolo_last_error();
  EXPECT_EQ(kolo_alloc(64, nullptr), KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kolo_last_error()).find("out is NULL"), std::string::npos);
  int on_stack = 0;
  EXPECT_EQ(kolo_free(&on_stack), KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kolo_last_error()).find("kolo_free"), std::string::npos);
  EXPECT_EQ(kolo_free(nullptr), KOLO_OK);
  ASSERT_EQ(kolo_alloc(64, &p), KOLO_OK);
  EXPECT_EQ(kolo_free(p), KOLO_OK);
  EXPECT_EQ(kolo_free(p), KOLO_ERR_INVALID_ARGUMENT);  // twice
}

int32_t* alloc_ints(int64_t count, bool from_kolo, std::vector<int32_t>* heap) {
  if (!from_kolo) {
    heap->assign(static_cast<size_t>(count), 0);
    return heap->data();
  }
  void* p = nullptr;
  EXPECT_EQ(kolo_alloc(static_cast<size_t>(count) * 4, &p), KOLO_OK) << kolo_last_error();
  return static_cast<int32_t*>(p);
}

// An int32 SUM of `count` elements from kolo_alloc memory (or the heap on
// `heap_rank`), checked exactly; the buffers are freed afterwards.
void check_sum(int rank, int size, int64_t count, bool in_place, int heap_rank, int round) {
  SCOPED_TRACE("count " + std::to_string(count) + (in_place ? " in place" : " out of place") +
               " heap rank " + std::to_string(heap_rank) + " round " + std::to_string(round));
  const bool from_kolo = rank != heap_rank;
  std::vector<int32_t> heap_in, heap_out;
  int32_t* in = alloc_ints(count, from_kolo, &heap_in);
  int32_t* out = in_place ? in : alloc_ints(count, from_kolo, &heap_out);
  ASSERT_NE(in, nullptr);
  for (int64_t i = 0; i < count; ++i) in[i] = static_cast<int32_t>((rank + 1) * (i % 977) + round);
  std::string msg;
  ASSERT_EQ(allreduce("m" + std::to_string(round), in, out, count, KOLO_INT32, KOLO_OP_SUM, &msg),
            KOLO_OK) << msg;
  const int32_t ranks = size * (size + 1) / 2;
  int64_t wrong = 0, first = -1;
  for (int64_t i = 0; i < count; ++i) {
    if (out[i] == ranks * static_cast<int32_t>(i % 977) + size * round) continue;
    if (wrong++ == 0) first = i;
  }
  EXPECT_EQ(wrong, 0) << "first wrong element " << first;
  if (!in_place && count > 0) {
    EXPECT_EQ(in[count - 1], static_cast<int32_t>((rank + 1) * ((count - 1) % 977) + round))
        << "input changed";
  }
  if (from_kolo) {
    EXPECT_EQ(kolo_free(in), KOLO_OK);
    if (!in_place) {
      EXPECT_EQ(kolo_free(out), KOLO_OK);
    }
  }
}

TEST_F(KoloTest, KoloMemoryAllreducesAreExact) {
  const int64_t mib = (int64_t{1} << 20) / 4;
  int round = 0;
  for (int64_t count : {mib, 3 * mib + 7, mib - 1}) {
    for (bool in_place : {true, false}) check_sum(rank_, size_, count, in_place, -1, round++);
  }
}

TEST_F(KoloTest, AHeapBufferOnAnyRankStillWorks) {
  const int64_t count = (int64_t{2} << 20) / 4 + 5;
  for (int heap_rank = 0; heap_rank < size_; ++heap_rank) {
    check_sum(rank_, size_, count, true, heap_rank, heap_rank);
  }
}

int32_t element(int from, int to, int64_t i, int round) {
  return static_cast<int32_t>(1000003 * from + 7919 * to + (i % 1013) + 17 * round);
}

// Waits for `h` (enqueued with status `s`) and counts the elements of its
// handle-owned output that differ from want(i).
template <typename Want>
void check_handle_output(kolo_status_t s, kolo_handle_t h, int64_t count, Want want) {
  ASSERT_EQ(s, KOLO_OK) << kolo_last_error();
  ASSERT_EQ(wait_or_abort(h), KOLO_OK) << kolo_handle_message(h);
  const void* out = nullptr;
  int64_t bytes = 0;
  ASSERT_EQ(kolo_handle_output(h, &out, &bytes), KOLO_OK);
  ASSERT_EQ(bytes, count * 4);
  const int32_t* got = static_cast<const int32_t*>(out);
  int64_t wrong = 0;
  for (int64_t i = 0; i < count; ++i) wrong += got[i] != want(i);
  EXPECT_EQ(wrong, 0);
  kolo_handle_release(h);
}

// Allgather, broadcast, alltoall and reducescatter of 1 MiB and more a rank
// from kolo_alloc memory (the heap on `heap_rank`), each result exact.
void check_collectives(int rank, int size, int heap_rank, int round) {
  SCOPED_TRACE("heap rank " + std::to_string(heap_rank));
  const bool from_kolo = rank != heap_rank;
  const int64_t per = 300007;  // int32 elements a rank sends: 1.2 MB
  const std::string tag = std::to_string(round);
  std::vector<int32_t> heap_in, heap_out;
  int32_t* in = alloc_ints(per * size, from_kolo, &heap_in);
  ASSERT_NE(in, nullptr);

  // Allgather: `per` elements from each rank.
  for (int64_t i = 0; i < per; ++i) in[i] = element(rank, 0, i, round);
  kolo_handle_t h = nullptr;
  kolo_status_t s = kolo_allgather_async(("g" + tag).c_str(), in, per, 1, KOLO_INT32, cpu(), &h);
  check_handle_output(s, h, per * size, [&](int64_t i) {
    return element(static_cast<int>(i / per), 0, i % per, round);
  });

  // Alltoall: `per` elements to each rank.
  for (int d = 0; d < size; ++d)
    for (int64_t i = 0; i < per; ++i) in[d * per + i] = element(rank, d, i, round);
  s = kolo_alltoall_async(("a" + tag).c_str(), in, per * size, 1, nullptr, KOLO_INT32, cpu(), &h);
  check_handle_output(s, h, per * size, [&](int64_t i) {
    return element(static_cast<int>(i / per), rank, i % per, round);
  });

  // Broadcast from the last rank, in place there.
  const int root = size - 1;
  int32_t* out = alloc_ints(per, from_kolo, &heap_out);
  for (int64_t i = 0; i < per; ++i) out[i] = rank == root ? element(root, 1, i, round) : -1;
  s = kolo_broadcast_async(("b" + tag).c_str(), out, out, per, KOLO_INT32, root, cpu(), &h);
  ASSERT_EQ(s, KOLO_OK) << kolo_last_error();
  ASSERT_EQ(wait_or_abort(h), KOLO_OK) << kolo_handle_message(h);
  kolo_handle_release(h);
  int64_t wrong = 0;
  for (int64_t i = 0; i < per; ++i) wrong += out[i] != element(root, 1, i, round);
  EXPECT_EQ(wrong, 0) << "broadcast";

  // Reducescatter (SUM) of `per` elements a shard: every rank sends
  // element(rank, d, i), so shard `rank` sums element(r, rank, i) over r.
  for (int d = 0; d < size; ++d)
    for (int64_t i = 0; i < per; ++i) in[d * per + i] = element(rank, d, i, round);
  s = kolo_reducescatter_async(("r" + tag).c_str(), in, out, per * size, 1, KOLO_INT32,
                               KOLO_OP_SUM, 1.0, 1.0, cpu(), &h);
  ASSERT_EQ(s, KOLO_OK) << kolo_last_error();
  ASSERT_EQ(wait_or_abort(h), KOLO_OK) << kolo_handle_message(h);
  kolo_handle_release(h);
  wrong = 0;
  for (int64_t i = 0; i < per; ++i) {
    int32_t sum = 0;
    for (int r = 0; r < size; ++r) sum += element(r, rank, i, round);
    wrong += out[i] != sum;
  }
  EXPECT_EQ(wrong, 0) << "reducescatter";
  if (from_kolo) {
    EXPECT_EQ(kolo_free(in), KOLO_OK);
    EXPECT_EQ(kolo_free(out), KOLO_OK);
  }
}

// Note [Outputs the peers can map] (core/output_pool.h): an allgather output of
// 16 MiB or more comes from kolo_alloc memory, so the shm engine pushes each
// rank's block into its peers' outputs (Note [An allgather pushes its block]).
// Blocks of 16 MiB and more (one rank's empty), twice so that the second takes
// its output from the pool, exact both times.
TEST_F(KoloTest, LargeAllgathersIntoPooledKoloMemoryAreExact) {
  const int64_t per = (int64_t{16} << 20) / 4 + 3;
  auto rows = [&](int r) { return r == 1 ? int64_t{0} : per + r; };
  int64_t total = 0;
  for (int r = 0; r < size_; ++r) total += rows(r);
  std::vector<int32_t> heap;
  int32_t* in = alloc_ints(rows(rank_) + 1, true, &heap);
  ASSERT_NE(in, nullptr);
  for (int round = 0; round < 2; ++round) {
    for (int64_t i = 0; i < rows(rank_); ++i) in[i] = element(rank_, 0, i, round);
    kolo_handle_t h = nullptr;
    kolo_status_t s =
        kolo_allgather_async("large", in, rows(rank_), 1, KOLO_INT32, cpu(), &h);
    std::vector<int64_t> start(static_cast<size_t>(size_) + 1, 0);
    for (int r = 0; r < size_; ++r) start[r + 1] = start[r] + rows(r);
    check_handle_output(s, h, total, [&](int64_t i) {
      int r = 0;
      while (i >= start[r + 1]) ++r;
      return element(r, 0, i - start[r], round);
    });
  }
  EXPECT_EQ(kolo_free(in), KOLO_OK);
}

TEST_F(KoloTest, KoloMemoryCollectivesAreExact) {
  for (int heap_rank = -1; heap_rank < size_; ++heap_rank)
    check_collectives(rank_, size_, heap_rank, heap_rank + 1);
}

}  // namespace
}  // namespace kolo_test
