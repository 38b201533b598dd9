// A C++ program using the installed kolo through kolo.hpp: Session, typed
// allreduce_async in both forms, Handle ownership and kolo::Error, then the
// collective set (allgather, broadcast, alltoall, reducescatter, grouped
// allreduce, barrier, join) with Handle::output / splits. Every expected value is
// exact. Run under mpiexec with any number of ranks; exits non-zero on any
// failure, naming it.
#include <kolo/kolo.hpp>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace {

static_assert(kolo::dtype_of<std::uint8_t>() == KOLO_UINT8);
static_assert(kolo::dtype_of<std::int8_t>() == KOLO_INT8);
static_assert(kolo::dtype_of<std::uint16_t>() == KOLO_UINT16);
static_assert(kolo::dtype_of<std::int16_t>() == KOLO_INT16);
static_assert(kolo::dtype_of<std::int32_t>() == KOLO_INT32);
static_assert(kolo::dtype_of<std::int64_t>() == KOLO_INT64);
static_assert(kolo::dtype_of<kolo::float16_t>() == KOLO_FLOAT16);
static_assert(kolo::dtype_of<kolo::bfloat16_t>() == KOLO_BFLOAT16);
static_assert(kolo::dtype_of<float>() == KOLO_FLOAT32);
static_assert(kolo::dtype_of<const double>() == KOLO_FLOAT64);
static_assert(kolo::dtype_of<bool>() == KOLO_BOOL);
static_assert(kolo::cpu_device().kind == KOLO_DEVICE_CPU);

int failures = 0;

void expect(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "consumer (C++): rank %d: FAILED: %s\n", kolo_rank(), what);
    ++failures;
  }
}

// Typed sums over several dtypes; rank r contributes r + 1, so the sum is n(n+1)/2.
void typed_sums(int n, int rank) {
  const int64_t want = n * (n + 1) / 2;
  std::vector<int64_t> i64(7, rank + 1);
  std::vector<float> f32(3, static_cast<float>(rank + 1));
  std::vector<std::int16_t> i16(1, static_cast<std::int16_t>(rank + 1));
  kolo::Handle a = kolo::allreduce_async("cpp/i64", i64.data(), i64.data(), 7);
  kolo::Handle b = kolo::allreduce_async("cpp/f32", f32.data(), f32.data(), 3);
  kolo::Handle c = kolo::allreduce_async("cpp/i16", i16.data(), i16.data(), 1, KOLO_OP_MAX);
  a.wait_or_throw();
  b.wait_or_throw();
  c.wait_or_throw();
  for (int64_t v : i64) expect(v == want, "int64 SUM");
  for (float v : f32) expect(v == static_cast<float>(want), "float32 SUM");
  expect(i16[0] == n, "int16 MAX");
  expect(a.poll() && a.status() == KOLO_OK && a.message().empty(), "completed handle state");
}

// 1.0 in both 16-bit formats, summed over n ranks, is n exactly (n <= 4 here).
void half_sums(int n) {
  const std::uint16_t half_of[] = {0, 0x3C00, 0x4000, 0x4200, 0x4400};      // IEEE binary16
  const std::uint16_t bhalf_of[] = {0, 0x3F80, 0x4000, 0x4040, 0x4080};     // bfloat16
  if (n > 4) return;
  kolo::float16_t h{0x3C00};
  kolo::bfloat16_t bh{0x3F80};
  kolo::allreduce_async("cpp/f16", &h, &h, 1).wait_or_throw();
  kolo::allreduce_async("cpp/bf16", &bh, &bh, 1).wait_or_throw();
  expect(h.bits == half_of[n], "float16 SUM");
  expect(bh.bits == bhalf_of[n], "bfloat16 SUM");
}

// The destructor of a Handle waits for completion, so the output is final after it.
void handle_ownership(int n) {
  double value = 2.0;
  {
    kolo::Handle scoped = kolo::allreduce_async("cpp/scoped", &value, &value, 1, KOLO_OP_SUM);
    kolo::Handle moved = std::move(scoped);
    expect(!scoped && scoped.poll() && scoped.status() == KOLO_ERR_INVALID_ARGUMENT,
           "moved-from Handle is empty");
    expect(static_cast<bool>(moved), "moved-to Handle owns the operation");
  }
  expect(value == 2.0 * n, "Handle destructor waited for the result");
}

// Caller mistakes: the non-throwing form reports them, the throwing form throws.
void errors() {
  double x = 1.0;
  kolo::Handle handle;
  const kolo_status_t status = kolo::allreduce_async("cpp/bad", &x, &x, -1, &handle);
  expect(status == KOLO_ERR_INVALID_ARGUMENT && !handle, "negative count is rejected");
  try {
    kolo::allreduce_async<double>("cpp/bad", nullptr, &x, 1);
    expect(false, "a null input throws");
  } catch (const kolo::Error& error) {
    expect(error.code() == KOLO_ERR_INVALID_ARGUMENT, "kolo::Error carries the code");
  }
  expect(handle.wait() == KOLO_ERR_INVALID_ARGUMENT, "empty Handle::wait");
}

// Rank r contributes r + 1 rows of two int32 values, r * 100 + i.
void allgather(int n, int rank) {
  std::vector<std::int32_t> in(2 * (rank + 1));
  for (size_t i = 0; i < in.size(); ++i) in[i] = rank * 100 + static_cast<std::int32_t>(i);
  kolo::Handle h = kolo::allgather_async("cpp/gather", in.data(), rank + 1, /*row_count=*/2);
  const std::int32_t* view = nullptr;
  std::int64_t count = -1;
  h.wait_or_throw();
  std::vector<std::int32_t> want;
  std::vector<std::int64_t> want_splits;
  for (int r = 0; r < n; ++r) {
    want_splits.push_back(r + 1);
    for (int i = 0; i < 2 * (r + 1); ++i) want.push_back(r * 100 + i);
  }
  expect(h.output<std::int32_t>() == want, "allgather output<int32_t>()");
  expect(h.splits() == want_splits, "allgather splits()");
  expect(h.output(&view, &count) == KOLO_OK && count == static_cast<std::int64_t>(want.size()) &&
             std::vector<std::int32_t>(view, view + count) == want,
         "allgather output view");
  // A rank may contribute nothing; a non-throwing submission.
  kolo::Handle empty;
  const double one = 1.0;
  expect(kolo::allgather_async("cpp/gather0", &one, rank == 0 ? 1 : 0, &empty) == KOLO_OK,
         "allgather non-throwing form");
  empty.wait_or_throw();
  expect(empty.output<double>() == std::vector<double>{1.0}, "allgather of rank 0's row only");
  // 8 bytes are not a whole number of 3-byte elements.
  struct Three {
    char bytes[3];
  };
  try {
    (void)empty.output<Three>();
    expect(false, "output<T> of a size that T does not divide throws");
  } catch (const kolo::Error& error) {
    expect(error.code() == KOLO_ERR_INVALID_ARGUMENT, "output<T> size mismatch code");
  }
}

// Root n - 1 broadcasts 0, 7, 14, ...; once out of place (input null elsewhere),
// once in place.
void broadcast(int n, int rank) {
  const int root = n - 1;
  std::vector<std::int64_t> src(100), dst(100, -1), in_place(100, -5);
  for (int i = 0; i < 100; ++i) src[i] = in_place[i] = rank == root ? 7 * i : -5;
  kolo::Handle a = kolo::broadcast_async("cpp/bcast", rank == root ? src.data() : nullptr,
                                         dst.data(), 100, root);
  kolo::Handle b;
  expect(kolo::broadcast_async("cpp/bcast_in_place", in_place.data(), in_place.data(), 100, root,
                               &b) == KOLO_OK,
         "broadcast non-throwing form");
  a.wait_or_throw();
  b.wait_or_throw();
  bool ok = true;
  for (int i = 0; i < 100; ++i) ok = ok && dst[i] == 7 * i && in_place[i] == 7 * i;
  expect(ok, "broadcast values");
}

// Even alltoall: rank r sends 1000 r + d to rank d (one row each). Uneven: rank r
// sends (r + d) % 2 rows of 3 floats to rank d.
void alltoall(int n, int rank) {
  std::vector<float> even(n);
  for (int d = 0; d < n; ++d) even[d] = static_cast<float>(1000 * rank + d);
  kolo::Handle h = kolo::alltoall_async("cpp/a2a", even.data(), n);
  h.wait_or_throw();
  std::vector<float> want;
  for (int s = 0; s < n; ++s) want.push_back(static_cast<float>(1000 * s + rank));
  expect(h.output<float>() == want, "even alltoall output");
  expect(h.splits() == std::vector<std::int64_t>(n, 1), "even alltoall splits");

  std::vector<std::int64_t> splits(n);
  std::vector<float> in;
  for (int d = 0; d < n; ++d) {
    splits[d] = (rank + d) % 2;
    for (int i = 0; i < 3 * splits[d]; ++i) in.push_back(static_cast<float>(rank * 100 + d * 10 + i));
  }
  kolo::Handle u;
  expect(kolo::alltoall_async("cpp/a2a_uneven", in.data(), static_cast<std::int64_t>(in.size() / 3),
                              &splits, &u, /*row_count=*/3) == KOLO_OK,
         "uneven alltoall non-throwing form");
  u.wait_or_throw();
  std::vector<float> got_want;
  std::vector<std::int64_t> received;
  for (int s = 0; s < n; ++s) {
    received.push_back((s + rank) % 2);
    for (int i = 0; i < 3 * received.back(); ++i) got_want.push_back(static_cast<float>(s * 100 + rank * 10 + i));
  }
  expect(u.output<float>() == got_want, "uneven alltoall output");
  expect(u.splits() == received, "uneven alltoall splits");

  std::vector<std::int64_t> short_splits(n + 1, 0);
  kolo::Handle bad;
  expect(kolo::alltoall_async("cpp/a2a_bad", in.data(), 0, &short_splits, &bad) ==
                 KOLO_ERR_INVALID_ARGUMENT && !bad,
         "alltoall refuses splits of the wrong size");
}

// 2n + 1 rows of 2: rank 0 gets 3 rows, the others 2. SUM on int32 rows valued
// (r + 1) * i, and AVERAGE on the same (exact: integer division of n(n+1)/2 * i).
void reducescatter(int n, int rank) {
  const std::int64_t rows = 2 * n + 1;
  const std::int64_t mine = kolo::reducescatter_shard_rows(rows, rank, n);
  expect(mine == (rank == 0 ? 3 : 2), "reducescatter_shard_rows: the first rank gets one more");
  std::int64_t first = 0;
  for (int r = 0; r < rank; ++r) first += 2 * kolo::reducescatter_shard_rows(rows, r, n);
  std::vector<std::int32_t> in(2 * rows);
  for (size_t i = 0; i < in.size(); ++i) in[i] = (rank + 1) * static_cast<std::int32_t>(i);
  std::vector<std::int32_t> sum(2 * mine, -1), avg(2 * mine, -1);
  kolo::Handle a = kolo::reducescatter_async("cpp/rs_sum", in.data(), sum.data(), rows, 2);
  kolo::Handle b;
  expect(kolo::reducescatter_async("cpp/rs_avg", in.data(), avg.data(), rows, &b, 2,
                                   KOLO_OP_AVERAGE) == KOLO_OK,
         "reducescatter non-throwing form");
  a.wait_or_throw();
  b.wait_or_throw();
  const std::int32_t rank_sum = n * (n + 1) / 2;
  bool ok = true;
  for (std::int64_t i = 0; i < 2 * mine; ++i) {
    const std::int32_t total = rank_sum * static_cast<std::int32_t>(first + i);
    ok = ok && sum[i] == total && avg[i] == total / n;
  }
  expect(ok, "reducescatter SUM and AVERAGE shards");
}

// Three tensors, one of them empty, as one group; out of place.
void grouped(int n, int rank) {
  std::vector<double> a(5, rank + 1.0), c(300, 2.0 * (rank + 1)), out_a(5), out_c(300);
  double b_in = 0.0, b_out = -1.0;
  kolo::Handle h = kolo::grouped_allreduce_async<double>(
      {"cpp/g.a", "cpp/g.b", "cpp/g.c"}, {a.data(), &b_in, c.data()},
      {out_a.data(), &b_out, out_c.data()}, {5, 0, 300});
  h.wait_or_throw();
  const double rank_sum = n * (n + 1) / 2.0;
  expect(out_a == std::vector<double>(5, rank_sum) && out_c == std::vector<double>(300, 2 * rank_sum) &&
             b_out == -1.0,
         "grouped allreduce values");
  kolo::Handle bad;
  expect(kolo::grouped_allreduce_async<double>({"cpp/g.x"}, {}, {}, {1}, &bad) ==
                 KOLO_ERR_INVALID_ARGUMENT && !bad,
         "grouped allreduce refuses vectors of different sizes");
}

// Rank r runs r + 1 steps of an int32 AVERAGE of n, then joins: a joined rank
// counts as zeros, so step s averages to the number of ranks still active.
void join_uneven(int n, int rank) {
  kolo::barrier();
  for (int step = 0; step <= rank; ++step) {
    std::int32_t g = n;
    kolo::allreduce_async("cpp/join_grad", &g, &g, 1, KOLO_OP_AVERAGE).wait_or_throw();
    expect(g == n - step, "allreduce while others have joined");
  }
  expect(kolo::join() == n - 1, "join returns the last rank");
  kolo::barrier();
}

}  // namespace

int main() {
  try {
    kolo::Session session;
    const int n = session.size(), rank = session.rank();
    typed_sums(n, rank);
    half_sums(n);
    handle_ownership(n);
    errors();
    allgather(n, rank);
    broadcast(n, rank);
    alltoall(n, rank);
    reducescatter(n, rank);
    grouped(n, rank);
    join_uneven(n, rank);
    if (failures == 0 && rank == 0) {
      std::printf("consumer (C++): %d ranks, kolo %s: OK\n", n, kolo_version());
    }
  } catch (const kolo::Error& error) {
    std::fprintf(stderr, "consumer (C++): %s\n", error.what());
    return 1;
  }
  return failures == 0 ? 0 : 1;
}
