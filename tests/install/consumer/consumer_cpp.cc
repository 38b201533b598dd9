// A C++ program using the installed kolo through kolo.hpp: Session, typed
// allreduce_async in both forms, Handle ownership and kolo::Error. Every expected
// value is exact. Run under mpiexec with any number of ranks; exits non-zero on
// any failure, naming it.
#include <kolo/kolo.hpp>

#include <cstdint>
#include <cstdio>
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

}  // namespace

int main() {
  try {
    kolo::Session session;
    const int n = session.size(), rank = session.rank();
    typed_sums(n, rank);
    half_sums(n);
    handle_ownership(n);
    errors();
    if (failures == 0 && rank == 0) {
      std::printf("consumer (C++): %d ranks, kolo %s: OK\n", n, kolo_version());
    }
  } catch (const kolo::Error& error) {
    std::fprintf(stderr, "consumer (C++): %s\n", error.what());
    return 1;
  }
  return failures == 0 ? 0 : 1;
}
