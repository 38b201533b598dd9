// kolo_alloc / kolo_free through the C API under mpiexec -n 2, 3, 4: bad
// arguments are refused by name; allreduces of 1 MiB and more from such memory
// (which the shm transport reads from the peers' buffers in place) give the
// exact results, in place and out of place, with buffers freed and allocated
// anew between calls, and beside heap buffers on other ranks.
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

}  // namespace
}  // namespace kolo_test
