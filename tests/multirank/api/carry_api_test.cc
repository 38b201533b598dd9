// Small cached operations that ride with the negotiation's AND (Note [Data rides
// with the AND] in src/core/negotiator.h), through the C API under mpiexec -n 2,
// 3, 4: allreduces exact for every dtype and op and the other collectives exact
// with uneven splits, with new inputs at every repeat; taken only where every
// rank's ready set is the same; seen in the timeline; off with
// KOLO_AND_CARRY_BYTES=0.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "api_dtypes.h"
#include "api_fixture.h"
#include "small_inputs.h"

namespace kolo_test {
namespace {

const ::testing::Environment* const kMpi = ::testing::AddGlobalTestEnvironment(new MpiEnvironment);

template <typename T>
class CarryDtype : public KoloTest {};
TYPED_TEST_SUITE(CarryDtype, AllDtypes);

// The first call of a name takes the slow path; the repeats are cached and, at
// most the carry's limit (16 KiB by default), ride with the AND: 3000 elements do
// for the types of at most 4 bytes. Each repeat has new inputs, so a result read
// from an earlier call's copies is caught.
TYPED_TEST(CarryDtype, CachedRepeatsAreExactForEveryOp) {
  using T = TypeParam;
  const kolo_dtype_t dtype = T::kDtype;
  const bool is_bool = dtype == KOLO_BOOL;
  const bool is_integer = dtype <= KOLO_INT64;
  const bool power_of_two = (this->size_ & (this->size_ - 1)) == 0;
  for (kolo_op_t op : {KOLO_OP_SUM, KOLO_OP_AVERAGE, KOLO_OP_MIN, KOLO_OP_MAX, KOLO_OP_PRODUCT}) {
    if (is_bool && op == KOLO_OP_AVERAGE) continue;  // refused (allreduce_api_test)
    for (int64_t count : {int64_t{1}, int64_t{this->size_ + 1}, int64_t{300}, int64_t{3000}}) {
      const std::string name = "carry" + std::to_string(op) + "_" + std::to_string(count);
      for (int repeat = 0; repeat < 4; ++repeat) {
        std::vector<typename T::Storage> in(count), out(count);
        for (int64_t i = 0; i < count; ++i)
          in[i] = T::from(input_value(this->rank_, i, repeat, is_bool));
        std::string msg;
        ASSERT_EQ(allreduce(name, in.data(), out.data(), count, dtype, op, &msg), KOLO_OK) << msg;
        for (int64_t i = 0; i < count; ++i) {
          const double want = expected(op, this->size_, i, repeat, is_bool, is_integer);
          const double got = T::to(out[i]);
          if (op == KOLO_OP_AVERAGE && !is_integer && !power_of_two) {
            const double tol = dtype == KOLO_FLOAT64 ? 1e-14 : dtype == KOLO_FLOAT32 ? 1e-6 : 1e-2;
            ASSERT_NEAR(got, want, tol * want) << name << " repeat " << repeat << " i=" << i;
          } else {
            ASSERT_EQ(got, want) << name << " repeat " << repeat << " i=" << i;
          }
        }
      }
    }
  }
}

// Factors ride too: the prescale is applied as the copy is packed, the postscale
// after the reduction (0.5 and 4 keep the sums exact), in place as well.
TEST_F(KoloTest, CachedRepeatsApplyBothFactorsInPlace) {
  for (int repeat = 0; repeat < 4; ++repeat) {
    std::vector<double> buf(7);
    for (size_t i = 0; i < buf.size(); ++i) buf[i] = rank_ + i + repeat;
    kolo_handle_t h = nullptr;
    ASSERT_EQ(kolo_allreduce_async("carry.factors", buf.data(), buf.data(), 7, KOLO_FLOAT64,
                                   KOLO_OP_SUM, 0.5, 4.0, cpu(), &h),
              KOLO_OK);
    ASSERT_EQ(wait_or_abort(h), KOLO_OK) << kolo_handle_message(h);
    kolo_handle_release(h);
    for (size_t i = 0; i < buf.size(); ++i) {
      const double sum = size_ * (size_ - 1) / 2.0 + size_ * static_cast<double>(i + repeat);
      ASSERT_EQ(buf[i], 2.0 * sum) << "repeat " << repeat << " i=" << i;
    }
  }
}

// Rank 0 has "carry.b" and "carry.a" both waiting when the others offer only
// "carry.a": the vectors differ, so nobody may use the carried copies (rank 0's
// starts with b's data, since b's cache bit is lower). Only a is ready in that
// cycle; b follows when the others submit it. Every value is exact.
TEST_F(KoloTest, ReadySetsThatDifferLeaveTheCarriedCopiesUnread) {
  std::vector<float> a(4), b(4), out_a(4), out_b(4);
  // Cache b first, then a: b gets the lower bit.
  for (int warm = 0; warm < 2; ++warm) {
    std::fill(b.begin(), b.end(), 100.0f);
    std::fill(a.begin(), a.end(), 1.0f);
    ASSERT_EQ(allreduce("carry.b", b.data(), out_b.data(), 4, KOLO_FLOAT32, KOLO_OP_SUM), KOLO_OK);
    ASSERT_EQ(allreduce("carry.a", a.data(), out_a.data(), 4, KOLO_FLOAT32, KOLO_OP_SUM), KOLO_OK);
  }
  for (int round = 0; round < 5; ++round) {
    for (int i = 0; i < 4; ++i) {
      a[i] = static_cast<float>(1 + rank_ + i + round);
      b[i] = static_cast<float>(100 * (rank_ + 1) + i + round);
    }
    std::fill(out_a.begin(), out_a.end(), -1.0f);
    std::fill(out_b.begin(), out_b.end(), -1.0f);
    kolo_handle_t ha = nullptr, hb = nullptr;
    if (rank_ == 0) {
      ASSERT_EQ(kolo_allreduce_async("carry.b", b.data(), out_b.data(), 4, KOLO_FLOAT32,
                                     KOLO_OP_SUM, 1.0, 1.0, cpu(), &hb),
                KOLO_OK);
      ASSERT_EQ(kolo_allreduce_async("carry.a", a.data(), out_a.data(), 4, KOLO_FLOAT32,
                                     KOLO_OP_SUM, 1.0, 1.0, cpu(), &ha),
                KOLO_OK);
      world_barrier();
    } else {
      world_barrier();
      ASSERT_EQ(kolo_allreduce_async("carry.a", a.data(), out_a.data(), 4, KOLO_FLOAT32,
                                     KOLO_OP_SUM, 1.0, 1.0, cpu(), &ha),
                KOLO_OK);
      ASSERT_EQ(wait_or_abort(ha), KOLO_OK) << kolo_handle_message(ha);
      ASSERT_EQ(kolo_allreduce_async("carry.b", b.data(), out_b.data(), 4, KOLO_FLOAT32,
                                     KOLO_OP_SUM, 1.0, 1.0, cpu(), &hb),
                KOLO_OK);
    }
    ASSERT_EQ(wait_or_abort(ha), KOLO_OK) << kolo_handle_message(ha);
    ASSERT_EQ(wait_or_abort(hb), KOLO_OK) << kolo_handle_message(hb);
    kolo_handle_release(ha);
    kolo_handle_release(hb);
    for (int i = 0; i < 4; ++i) {
      const float ranks = static_cast<float>(size_ * (size_ - 1) / 2);
      EXPECT_EQ(out_a[i], ranks + size_ * static_cast<float>(1 + i + round))
          << "round " << round << " i=" << i;
      EXPECT_EQ(out_b[i], 100 * (ranks + size_) + size_ * static_cast<float>(i + round))
          << "round " << round << " i=" << i;
    }
  }
}

// The other collectives ride alone (Note [Data rides with the AND]): allgathers
// and alltoalls with uneven rows, a rank that sends nothing, broadcasts from
// every root, a reducescatter with both factors. Each repeat has new values.
TEST_F(KoloTest, CachedCollectivesAreExact) {
  const int n = size_;
  const int64_t row = 3;
  for (int repeat = 0; repeat < 6; ++repeat) {
    // Allgather: rank r gives (r == 1 ? 0 : r + 2) rows.
    auto gather_rows = [](int r) { return int64_t{r == 1 ? 0 : r + 2}; };
    std::vector<int32_t> mine(static_cast<size_t>(gather_rows(rank_) * row));
    for (size_t i = 0; i < mine.size(); ++i) mine[i] = 1000 * rank_ + 10 * repeat + static_cast<int>(i);
    kolo_handle_t h = nullptr;
    ASSERT_EQ(kolo_allgather_async("carry.gather", mine.data(), gather_rows(rank_), row, KOLO_INT32,
                                   cpu(), &h),
              KOLO_OK);
    ASSERT_EQ(wait_or_abort(h), KOLO_OK) << kolo_handle_message(h);
    const void* data = nullptr;
    int64_t bytes = 0;
    ASSERT_EQ(kolo_handle_output(h, &data, &bytes), KOLO_OK);
    std::vector<int32_t> want;
    for (int r = 0; r < n; ++r)
      for (int64_t i = 0; i < gather_rows(r) * row; ++i)
        want.push_back(1000 * r + 10 * repeat + static_cast<int>(i));
    ASSERT_EQ(bytes, static_cast<int64_t>(want.size() * sizeof(int32_t)));
    const auto* got = static_cast<const int32_t*>(data);
    EXPECT_EQ(std::vector<int32_t>(got, got + want.size()), want) << "allgather repeat " << repeat;
    kolo_handle_release(h);

    // Broadcast from a root that moves with the repeat (a new name per root).
    const int root = repeat % n;
    std::vector<int32_t> cast(50, -1);
    if (rank_ == root)
      for (int i = 0; i < 50; ++i) cast[i] = 100 * root + repeat + i;
    const std::string cast_name = "carry.cast" + std::to_string(root);
    ASSERT_EQ(kolo_broadcast_async(cast_name.c_str(), cast.data(), cast.data(), 50, KOLO_INT32,
                                   root, cpu(), &h),
              KOLO_OK);
    ASSERT_EQ(wait_or_abort(h), KOLO_OK) << kolo_handle_message(h);
    kolo_handle_release(h);
    for (int i = 0; i < 50; ++i)
      ASSERT_EQ(cast[i], 100 * root + repeat + i) << "broadcast repeat " << repeat << " i=" << i;

    // Alltoall: rank r sends (r + d) % 3 rows to rank d (some none).
    auto sent = [](int r, int d) { return int64_t{(r + d) % 3}; };
    std::vector<int64_t> splits(n);
    std::vector<int32_t> input;
    for (int d = 0; d < n; ++d) {
      splits[d] = sent(rank_, d);
      for (int64_t j = 0; j < splits[d] * 2; ++j)
        input.push_back(10000 * rank_ + 100 * d + 10 * repeat + static_cast<int>(j));
    }
    int64_t rows = 0;
    for (int64_t s : splits) rows += s;
    ASSERT_EQ(kolo_alltoall_async("carry.a2a", input.data(), rows, 2, splits.data(), KOLO_INT32,
                                  cpu(), &h),
              KOLO_OK);
    ASSERT_EQ(wait_or_abort(h), KOLO_OK) << kolo_handle_message(h);
    ASSERT_EQ(kolo_handle_output(h, &data, &bytes), KOLO_OK);
    want.clear();
    for (int r = 0; r < n; ++r)
      for (int64_t j = 0; j < sent(r, rank_) * 2; ++j)
        want.push_back(10000 * r + 100 * rank_ + 10 * repeat + static_cast<int>(j));
    ASSERT_EQ(bytes, static_cast<int64_t>(want.size() * sizeof(int32_t)));
    got = static_cast<const int32_t*>(data);
    EXPECT_EQ(std::vector<int32_t>(got, got + want.size()), want) << "alltoall repeat " << repeat;
    kolo_handle_release(h);

    // Reducescatter of 2n + 1 rows of 2, prescale 0.5 and postscale 4: twice the sum.
    const int64_t rs_rows = 2 * n + 1;
    std::vector<float> rs(static_cast<size_t>(rs_rows * 2));
    for (size_t i = 0; i < rs.size(); ++i) rs[i] = static_cast<float>(rank_ + i + repeat);
    const int64_t shard = kolo_reducescatter_shard_rows(rs_rows, rank_, n);
    std::vector<float> out(static_cast<size_t>(shard * 2), -1.0f);
    ASSERT_EQ(kolo_reducescatter_async("carry.rs", rs.data(), out.data(), rs_rows, 2, KOLO_FLOAT32,
                                       KOLO_OP_SUM, 0.5, 4.0, cpu(), &h),
              KOLO_OK);
    ASSERT_EQ(wait_or_abort(h), KOLO_OK) << kolo_handle_message(h);
    kolo_handle_release(h);
    int64_t first = 0;
    for (int r = 0; r < rank_; ++r) first += kolo_reducescatter_shard_rows(rs_rows, r, n) * 2;
    for (int64_t i = 0; i < shard * 2; ++i) {
      const double sum = n * (n - 1) / 2.0 + n * static_cast<double>(first + i + repeat);
      ASSERT_EQ(out[static_cast<size_t>(i)], 2 * sum) << "reducescatter repeat " << repeat << " i=" << i;
    }
  }
}

size_t occurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// This rank's timeline of what `body(rank, size)` runs between kolo_init (with
// KOLO_AND_CARRY_BYTES set to `knob`; null: unset) and kolo_shutdown.
std::string timeline_of(const char* knob, const std::function<void(int, int)>& body) {
  if (knob != nullptr) setenv("KOLO_AND_CARRY_BYTES", knob, 1);
  const kolo_status_t init = kolo_init();
  unsetenv("KOLO_AND_CARRY_BYTES");
  EXPECT_EQ(init, KOLO_OK) << kolo_last_error();
  if (init != KOLO_OK) return "";
  const int rank = kolo_rank();
  const std::string stem = "/tmp/kolo-carry-" + std::to_string(getppid()) + "-";
  const std::string mine = stem + std::to_string(rank) + ".json";
  EXPECT_EQ(kolo_timeline_start((stem + "%r.json").c_str(), 0), KOLO_OK) << kolo_last_error();
  body(rank, kolo_size());
  EXPECT_EQ(kolo_timeline_stop(), KOLO_OK) << kolo_last_error();
  world_barrier();
  EXPECT_EQ(kolo_shutdown(), KOLO_OK);
  const std::string text = read_file(mine);
  std::remove(mine.c_str());
  return text;
}

// This rank's timeline of `repeats` allreduces of 4 KiB ("carry.fits") and of
// 4 KiB + 4 B ("carry.over"), with KOLO_AND_CARRY_BYTES set to `knob`
// (null: unset).
std::string timeline_of_repeats(const char* knob, int repeats) {
  return timeline_of(knob, [repeats](int, int) {
    std::vector<float> fits(1024, 1.0f), over(1025, 1.0f);
    for (int k = 0; k < repeats; ++k) {
      EXPECT_EQ(allreduce("carry.fits", fits.data(), fits.data(), 1024, KOLO_FLOAT32,
                          KOLO_OP_MAX),
                KOLO_OK);
      EXPECT_EQ(allreduce("carry.over", over.data(), over.data(), 1025, KOLO_FLOAT32,
                          KOLO_OP_MAX),
                KOLO_OK);
      kolo_handle_t h = nullptr;
      EXPECT_EQ(kolo_allgather_async("carry.g", fits.data(), 8, 1, KOLO_FLOAT32, cpu(), &h),
                KOLO_OK);
      EXPECT_EQ(wait_or_abort(h), KOLO_OK);
      kolo_handle_release(h);
      EXPECT_EQ(kolo_broadcast_async("carry.c", fits.data(), fits.data(), 8, KOLO_FLOAT32, 0,
                                     cpu(), &h),
                KOLO_OK);
      EXPECT_EQ(wait_or_abort(h), KOLO_OK);
      kolo_handle_release(h);
    }
  });
}

// Every bucket is one tensor; each appears as "allreduce <transport>".
TEST(CarryKnob, CachedBucketsUpToTheKnobRideAndOthersDoNot) {
  const int repeats = 20;
  const std::string on = timeline_of_repeats("4K", repeats);
  // The first of each name is the slow path; later ones may differ across ranks
  // only while the timeline starts (its flag is in the vector).
  const size_t rode = occurrences(on, "\"name\": \"allreduce shm+and\"");
  EXPECT_GE(rode, static_cast<size_t>(repeats / 2)) << on;
  EXPECT_LE(rode, static_cast<size_t>(repeats - 1)) << on;  // never "carry.over"
  EXPECT_EQ(occurrences(on, "\"name\": \"allreduce shm\"") + rode, static_cast<size_t>(2 * repeats))
      << on;
  for (const char* kind : {"allgather", "broadcast"}) {
    const size_t alone = occurrences(on, "\"name\": \"" + std::string(kind) + " shm+and\"");
    EXPECT_GE(alone, static_cast<size_t>(repeats / 2)) << kind << on;
    EXPECT_EQ(alone + occurrences(on, "\"name\": \"" + std::string(kind) + " shm\""),
              static_cast<size_t>(repeats))
        << kind << on;
  }

  // The default (16 KiB) takes 4 KiB + 4 B as well.
  const std::string by_default = timeline_of_repeats(nullptr, repeats);
  EXPECT_GE(occurrences(by_default, "\"name\": \"allreduce shm+and\""),
            static_cast<size_t>(repeats))
      << by_default;

  const std::string off = timeline_of_repeats("0", repeats);
  EXPECT_EQ(occurrences(off, "shm+and"), 0u) << off;
  EXPECT_EQ(occurrences(off, "\"name\": \"allgather shm\""), static_cast<size_t>(repeats)) << off;
  EXPECT_EQ(occurrences(off, "\"name\": \"allreduce shm\""), static_cast<size_t>(2 * repeats))
      << off;
}

// This rank's timeline of `repeats` cached allreduces of 16 KiB in place and
// allgathers of 16 KiB blocks, in memory from kolo_alloc on the ranks
// `in_kolo_memory` says and on the heap on the others; every result checked.
std::string timeline_of_memory(const std::function<bool(int)>& in_kolo_memory, int repeats) {
  return timeline_of(nullptr, [&](int rank, int n) {
    const int64_t count = 4096;
    std::vector<float> heap(static_cast<size_t>(count));
    void* mapped = nullptr;
    EXPECT_EQ(kolo_alloc(static_cast<size_t>(count) * sizeof(float), &mapped), KOLO_OK);
    float* buf = in_kolo_memory(rank) ? static_cast<float*>(mapped) : heap.data();
    for (int k = 0; k < repeats; ++k) {
      for (int64_t i = 0; i < count; ++i) buf[i] = static_cast<float>(rank + i % 7 + k);
      EXPECT_EQ(allreduce("carry.mem", buf, buf, count, KOLO_FLOAT32, KOLO_OP_SUM), KOLO_OK);
      int64_t wrong = 0;
      for (int64_t i = 0; i < count; ++i)
        wrong += buf[i] != static_cast<float>(n * (n - 1) / 2 + n * (i % 7 + k));
      EXPECT_EQ(wrong, 0) << "repeat " << k;
      for (int64_t i = 0; i < count; ++i) buf[i] = static_cast<float>(100 * rank + i % 5 + k);
      kolo_handle_t h = nullptr;
      EXPECT_EQ(kolo_allgather_async("carry.mem.g", buf, count, 1, KOLO_FLOAT32, cpu(), &h),
                KOLO_OK);
      EXPECT_EQ(wait_or_abort(h), KOLO_OK);
      const void* data = nullptr;
      int64_t bytes = 0;
      EXPECT_EQ(kolo_handle_output(h, &data, &bytes), KOLO_OK);
      EXPECT_EQ(bytes, static_cast<int64_t>(n * count * sizeof(float)));
      const float* got = static_cast<const float*>(data);
      wrong = 0;
      for (int64_t i = 0; got != nullptr && i < n * count; ++i)
        wrong += got[i] != static_cast<float>(100 * (i / count) + (i % count) % 5 + k);
      EXPECT_EQ(wrong, 0) << "allgather repeat " << k;
      kolo_handle_release(h);
    }
    world_barrier();  // no peer reads this rank's memory any more
    EXPECT_EQ(kolo_free(mapped), KOLO_OK);
  });
}

// Note [Kolo memory does not ride] (transports/shm/carrier.h): at 16 KiB, the
// carry's default limit, a bucket or an allgather's block from the heap rides
// with the AND, one from kolo memory goes to the engine, and so does one from
// kolo memory on rank 0 and the heap elsewhere (rank 0 packs nothing, so
// nothing rides). Exact every time.
TEST(CarryKnob, KoloMemoryOfTheEnginesSizesGoesToTheEngine) {
  const int repeats = 20;
  const std::string heap = timeline_of_memory([](int) { return false; }, repeats);
  for (const char* kind : {"allreduce", "allgather"}) {
    EXPECT_GE(occurrences(heap, "\"name\": \"" + std::string(kind) + " shm+and\""),
              static_cast<size_t>(repeats / 2))
        << kind << heap;
  }
  for (const bool everywhere : {true, false}) {
    const std::string text =
        timeline_of_memory([everywhere](int r) { return everywhere || r == 0; }, repeats);
    EXPECT_EQ(occurrences(text, "shm+and"), 0u) << (everywhere ? "every rank" : "rank 0") << text;
    EXPECT_EQ(occurrences(text, "\"name\": \"allreduce shm\""), static_cast<size_t>(repeats))
        << text;
    EXPECT_EQ(occurrences(text, "\"name\": \"allgather shm\""), static_cast<size_t>(repeats))
        << text;
  }
}

TEST(CarryKnob, OverItsLimitFailsInitNamingIt) {
  setenv("KOLO_AND_CARRY_BYTES", "17K", 1);
  EXPECT_EQ(kolo_init(), KOLO_ERR_INVALID_ARGUMENT);
  unsetenv("KOLO_AND_CARRY_BYTES");
  EXPECT_NE(std::string(kolo_last_error()).find("KOLO_AND_CARRY_BYTES"), std::string::npos)
      << kolo_last_error();
}

}  // namespace
}  // namespace kolo_test
