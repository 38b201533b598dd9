// kolo-soak: a long random run through the C API that checks every result and
// that memory stays flat. Run under mpiexec; every rank runs the same program.
//
//   mpiexec.mpich -n 2 build/bin/kolo-soak --ops 100000
//   flags: --ops N (per rank, all threads together; default 2000), --threads T
//          (default 4), --seed S, --max-rss-growth-mb M (default 5), --warmup N
//          (ops before the RSS baseline; default 500)
//
// Each thread issues batches of 1-8 operations, then waits for them all. Every
// rank's thread t draws the same sequence (seeded by seed and t), so the ranks
// agree on names and shapes while the threads interleave differently on each
// rank. An operation is an allreduce (every dtype and op), an allgather with
// rows differing per rank, a broadcast from a random root, an alltoall with
// random splits, or a reducescatter; counts are mostly small, sometimes up to
// 64K elements, sometimes 0. Names are fresh random strings or, to exercise
// the response cache, per-thread slot names reused every batch. Inputs are
// small integers (exact in every dtype, and chosen so sums, products and
// averages stay exact), so each rank computes every expected output itself and
// compares with ==.
//
// RSS (/proc/self/statm) is read after the warm-up ops (which grow pools and
// caches to their working size) and at the end; the run fails if any rank grew
// by the limit or more, or if any result was wrong. Rank 0 prints one line:
//   kolo-soak: PASS ranks 2 threads 4 ops 100000 time 41.3 s rss start 38.1 MB end 38.4 MB ...
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "api_dtypes.h"
#include "kolo/kolo.h"

namespace {

using namespace kolo_test_types;

struct Options {
  int64_t ops = 2000;
  int threads = 4;
  uint64_t seed = 1;
  double max_rss_growth_mb = 5;
  int64_t warmup = 500;
};

// ---- element access by dtype -------------------------------------------------

template <typename F>
void with_type(kolo_dtype_t d, F&& f) {
  switch (d) {
    case KOLO_UINT8: return f(Plain<uint8_t, KOLO_UINT8>{});
    case KOLO_INT8: return f(Plain<int8_t, KOLO_INT8>{});
    case KOLO_UINT16: return f(Plain<uint16_t, KOLO_UINT16>{});
    case KOLO_INT16: return f(Plain<int16_t, KOLO_INT16>{});
    case KOLO_INT32: return f(Plain<int32_t, KOLO_INT32>{});
    case KOLO_INT64: return f(Plain<int64_t, KOLO_INT64>{});
    case KOLO_FLOAT16: return f(Half{});
    case KOLO_BFLOAT16: return f(Bf16{});
    case KOLO_FLOAT32: return f(Plain<float, KOLO_FLOAT32>{});
    case KOLO_FLOAT64: return f(Plain<double, KOLO_FLOAT64>{});
    default: return f(Bool{});
  }
}

void put(kolo_dtype_t d, void* buf, int64_t i, double v) {
  with_type(d, [&](auto t) {
    using T = decltype(t);
    static_cast<typename T::Storage*>(buf)[i] = T::from(v);
  });
}

double get(kolo_dtype_t d, const void* buf, int64_t i) {
  double v = 0;
  with_type(d, [&](auto t) {
    using T = decltype(t);
    v = T::to(static_cast<const typename T::Storage*>(buf)[i]);
  });
  return v;
}

bool is_signed(kolo_dtype_t d) {
  return d != KOLO_UINT8 && d != KOLO_UINT16 && d != KOLO_BOOL;
}

// ---- one operation -----------------------------------------------------------

enum class Kind { kAllreduce, kAllgather, kBroadcast, kAlltoall, kReducescatter };

// Everything every rank draws identically for one operation.
struct Op {
  Kind kind;
  std::string name;
  kolo_dtype_t dtype;
  kolo_op_t op;
  int64_t count;       // elements (allreduce, broadcast); rows (reducescatter)
  int root;            // broadcast
  uint64_t value_seed; // inputs are value(value_seed, rank, i)
};

// A rank's input element i: a small integer, exact in every dtype.
//  SUM/AVERAGE: in [-3, 3] (signed) or [0, 3]; AVERAGE multiplies by the world
//  size so the mean stays an integer. PRODUCT: 1 or 2 (or -1 when signed), so a
//  product over four ranks is at most 16. Bool: 0 or 1.
double value(const Op& op, int rank, int64_t i, int size) {
  uint64_t x = op.value_seed ^ (static_cast<uint64_t>(rank) * 0x9E3779B97F4A7C15ull) ^
               (static_cast<uint64_t>(i) * 0xBF58476D1CE4E5B9ull);
  x ^= x >> 31;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 29;
  if (op.dtype == KOLO_BOOL) return static_cast<double>(x & 1);
  if (op.kind == Kind::kAllreduce && op.op == KOLO_OP_PRODUCT) {
    const int r = static_cast<int>(x % 3);
    return r == 2 ? (is_signed(op.dtype) ? -1 : 1) : r + 1;
  }
  double v = is_signed(op.dtype) ? static_cast<double>(static_cast<int>(x % 7) - 3)
                                 : static_cast<double>(x % 4);
  if (op.op == KOLO_OP_AVERAGE) v *= size;
  return v;
}

double reduce_expected(const Op& op, int64_t i, int size) {
  double acc = value(op, 0, i, size);
  for (int r = 1; r < size; ++r) {
    const double v = value(op, r, i, size);
    switch (op.op) {
      case KOLO_OP_MIN: acc = std::min(acc, v); break;
      case KOLO_OP_MAX: acc = std::max(acc, v); break;
      case KOLO_OP_PRODUCT: acc *= v; break;
      default: acc += v; break;
    }
  }
  if (op.dtype == KOLO_BOOL) return acc != 0 ? 1 : 0;  // or / and of 0s and 1s
  if (op.op == KOLO_OP_AVERAGE) acc /= size;
  return acc;
}

// Rows a rank contributes to an allgather / sends to each rank in an alltoall.
int64_t rows_of(const Op& op, int rank, int peer) {
  return static_cast<int64_t>((op.value_seed >> ((rank * 5 + peer) % 40)) % 5);
}

class Soak {
 public:
  Soak(const Options& o, int rank, int size) : o_(o), rank_(rank), size_(size) {}

  // Runs `ops` operations as thread t, drawing them from rng.
  void run_thread(int t, int64_t ops, std::mt19937_64* rng);
  int64_t failures() const { return failures_.load(); }

 private:
  Op draw(std::mt19937_64* rng, int t, int slot, int64_t n);
  kolo_status_t start(const Op& op, std::vector<char>* in, std::vector<char>* out,
                      kolo_handle_t* h);
  void check(const Op& op, const std::vector<char>& out, kolo_handle_t h);
  void fail(const Op& op, const std::string& what);

  const Options o_;
  const int rank_;
  const int size_;
  std::atomic<int64_t> failures_{0};
};

Op Soak::draw(std::mt19937_64* rng, int t, int slot, int64_t n) {
  static const kolo_dtype_t kDtypes[] = {KOLO_UINT8,   KOLO_INT8,    KOLO_UINT16,  KOLO_INT16,
                                         KOLO_INT32,   KOLO_INT64,   KOLO_FLOAT16, KOLO_BFLOAT16,
                                         KOLO_FLOAT32, KOLO_FLOAT64, KOLO_BOOL};
  Op op;
  const uint64_t k = (*rng)() % 10;
  op.kind = k < 6 ? Kind::kAllreduce : static_cast<Kind>(k - 5);
  op.dtype = kDtypes[(*rng)() % 11];
  op.op = static_cast<kolo_op_t>((*rng)() % 5);
  if (op.dtype == KOLO_BOOL && op.op == KOLO_OP_AVERAGE) op.op = KOLO_OP_SUM;
  if (op.kind == Kind::kReducescatter) {
    op.op = (*rng)() % 2 ? KOLO_OP_SUM : KOLO_OP_AVERAGE;
    if (op.dtype == KOLO_BOOL) op.dtype = KOLO_INT32;
  }
  const uint64_t c = (*rng)() % 100;
  op.count = c < 3 ? 0 : c < 90 ? 1 + static_cast<int64_t>((*rng)() % 1024)
                                : 1 + static_cast<int64_t>((*rng)() % 65536);
  op.root = static_cast<int>((*rng)() % size_);
  op.value_seed = (*rng)();
  char name[96];
  if ((*rng)() % 2 == 0) {  // reused every batch: response cache hits and misses
    std::snprintf(name, sizeof name, "soak/t%d/slot%d", t, slot);
  } else {
    std::snprintf(name, sizeof name, "soak/t%d/op%lld/%016llx", t, static_cast<long long>(n),
                  static_cast<unsigned long long>((*rng)()));
  }
  op.name = name;
  return op;
}

kolo_status_t Soak::start(const Op& op, std::vector<char>* in, std::vector<char>* out,
                          kolo_handle_t* h) {
  const size_t es = kolo_dtype_size(op.dtype);
  const kolo_device_t cpu = KOLO_CPU_DEVICE;
  switch (op.kind) {
    case Kind::kAllreduce:
    case Kind::kBroadcast:
    case Kind::kReducescatter: {
      in->resize(std::max<int64_t>(op.count, 1) * es);
      for (int64_t i = 0; i < op.count; ++i) put(op.dtype, in->data(), i, value(op, rank_, i, size_));
      if (op.kind == Kind::kAllreduce) {
        out->resize(in->size());
        return kolo_allreduce_async(op.name.c_str(), in->data(), out->data(), op.count, op.dtype,
                                    op.op, 1.0, 1.0, cpu, h);
      }
      if (op.kind == Kind::kBroadcast) {
        out->resize(in->size());
        return kolo_broadcast_async(op.name.c_str(), in->data(), out->data(), op.count,
                                    op.dtype, op.root, cpu, h);
      }
      out->resize(std::max<int64_t>(kolo_reducescatter_shard_rows(op.count, rank_, size_), 1) *
                  es);
      return kolo_reducescatter_async(op.name.c_str(), in->data(), out->data(), op.count, 1,
                                      op.dtype, op.op, 1.0, 1.0, cpu, h);
    }
    case Kind::kAllgather: {
      const int64_t rows = rows_of(op, rank_, 0);
      in->resize(std::max<int64_t>(rows, 1) * 2 * es);
      for (int64_t i = 0; i < rows * 2; ++i) put(op.dtype, in->data(), i, value(op, rank_, i, size_));
      return kolo_allgather_async(op.name.c_str(), in->data(), rows, 2, op.dtype, cpu, h);
    }
    case Kind::kAlltoall: {
      std::vector<int64_t> splits(size_);
      int64_t rows = 0;
      for (int d = 0; d < size_; ++d) rows += splits[d] = rows_of(op, rank_, d);
      in->resize(std::max<int64_t>(rows, 1) * es);
      for (int64_t i = 0; i < rows; ++i) put(op.dtype, in->data(), i, value(op, rank_, i, size_));
      return kolo_alltoall_async(op.name.c_str(), in->data(), rows, 1, splits.data(), op.dtype,
                                 cpu, h);
    }
  }
  return KOLO_ERR_INTERNAL;
}

void Soak::fail(const Op& op, const std::string& what) {
  if (failures_.fetch_add(1) < 10)
    std::fprintf(stderr, "kolo-soak: rank %d: %s: %s\n", rank_, op.name.c_str(), what.c_str());
}

void Soak::check(const Op& op, const std::vector<char>& out, kolo_handle_t h) {
  auto expect = [&](const void* buf, int64_t i, double want) {
    const double got = get(op.dtype, buf, i);
    if (got != want) {
      fail(op, "element " + std::to_string(i) + " is " + std::to_string(got) + ", expected " +
                   std::to_string(want));
      return false;
    }
    return true;
  };
  switch (op.kind) {
    case Kind::kAllreduce:
      for (int64_t i = 0; i < op.count; ++i)
        if (!expect(out.data(), i, reduce_expected(op, i, size_))) return;
      return;
    case Kind::kBroadcast:
      for (int64_t i = 0; i < op.count; ++i)
        if (!expect(out.data(), i, value(op, op.root, i, size_))) return;
      return;
    case Kind::kReducescatter: {
      int64_t first = 0;
      for (int r = 0; r < rank_; ++r) first += kolo_reducescatter_shard_rows(op.count, r, size_);
      const int64_t mine = kolo_reducescatter_shard_rows(op.count, rank_, size_);
      for (int64_t i = 0; i < mine; ++i)
        if (!expect(out.data(), i, reduce_expected(op, first + i, size_))) return;
      return;
    }
    case Kind::kAllgather:
    case Kind::kAlltoall: {
      const void* data = nullptr;
      int64_t bytes = 0;
      if (kolo_handle_output(h, &data, &bytes) != KOLO_OK) return fail(op, "no output");
      int64_t at = 0;
      for (int src = 0; src < size_; ++src) {
        // Allgather: all of src's rows (2 elements each). Alltoall: the rows src
        // sent to this rank, which start after those it sent to lower ranks.
        int64_t n = 0, from = 0;
        if (op.kind == Kind::kAllgather) {
          n = rows_of(op, src, 0) * 2;
        } else {
          for (int d = 0; d < rank_; ++d) from += rows_of(op, src, d);
          n = rows_of(op, src, rank_);
        }
        for (int64_t i = 0; i < n; ++i)
          if (!expect(data, at + i, value(op, src, from + i, size_))) return;
        at += n;
      }
      if (bytes != at * static_cast<int64_t>(kolo_dtype_size(op.dtype)))
        fail(op, "output of " + std::to_string(bytes) + " bytes");
      return;
    }
  }
}

void Soak::run_thread(int t, int64_t ops, std::mt19937_64* rng) {
  struct InFlight {
    Op op;
    std::vector<char> in, out;
    kolo_handle_t h = nullptr;
  };
  std::vector<InFlight> batch;
  int64_t n = 0;
  while (n < ops) {
    const int k = static_cast<int>(std::min<int64_t>(1 + (*rng)() % 8, ops - n));
    batch.resize(k);
    for (int j = 0; j < k; ++j) {
      InFlight& f = batch[j];
      f.op = draw(rng, t, j, n + j);
      const kolo_status_t s = start(f.op, &f.in, &f.out, &f.h);
      if (s != KOLO_OK) {
        fail(f.op, std::string("submit: ") + kolo_status_string(s) + ": " + kolo_last_error());
        f.h = nullptr;
      }
    }
    for (InFlight& f : batch) {
      if (f.h == nullptr) continue;
      const kolo_status_t s = kolo_wait(f.h, -1.0);
      if (s != KOLO_OK) {
        fail(f.op, std::string(kolo_status_string(s)) + ": " + kolo_handle_message(f.h));
      } else {
        check(f.op, f.out, f.h);
      }
      kolo_handle_release(f.h);
      f.h = nullptr;
    }
    n += k;
  }
}

double rss_mb() {
  long pages_total = 0, pages_resident = 0;
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return -1;
  if (std::fscanf(f, "%ld %ld", &pages_total, &pages_resident) != 2) pages_resident = -1;
  std::fclose(f);
  return static_cast<double>(pages_resident) * sysconf(_SC_PAGESIZE) / (1 << 20);
}

bool parse(int argc, char** argv, Options* o) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const char* v = argv[i + 1];
    if (flag == "--ops") o->ops = std::atoll(v);
    else if (flag == "--threads") o->threads = std::atoi(v);
    else if (flag == "--seed") o->seed = std::strtoull(v, nullptr, 10);
    else if (flag == "--max-rss-growth-mb") o->max_rss_growth_mb = std::atof(v);
    else if (flag == "--warmup") o->warmup = std::atoll(v);
    else return false;
  }
  return argc % 2 == 1 && o->ops >= 0 && o->threads >= 1 && o->warmup >= 0;
}

// Runs `ops` operations spread over the threads; thread t's draws continue from
// where its previous phase stopped.
void run_phase(Soak* soak, const Options& o, int64_t ops, std::vector<std::mt19937_64>* rngs) {
  std::vector<std::thread> threads;
  for (int t = 0; t < o.threads; ++t) {
    const int64_t mine = ops / o.threads + (t < ops % o.threads ? 1 : 0);
    threads.emplace_back([&, t, mine] { soak->run_thread(t, mine, &(*rngs)[t]); });
  }
  for (auto& th : threads) th.join();
}

// The largest value of x over the ranks (through kolo itself).
double max_over_ranks(double x, const char* name) {
  double out = x;
  kolo_handle_t h = nullptr;
  if (kolo_allreduce_async(name, &x, &out, 1, KOLO_FLOAT64, KOLO_OP_MAX, 1, 1, KOLO_CPU_DEVICE,
                           &h) != KOLO_OK ||
      kolo_wait(h, -1.0) != KOLO_OK)
    out = 1e300;
  kolo_handle_release(h);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse(argc, argv, &o)) {
    std::fprintf(stderr,
                 "usage: kolo-soak [--ops N] [--threads T] [--seed S] [--max-rss-growth-mb M] "
                 "[--warmup N]\n");
    return 2;
  }
  if (kolo_init() != KOLO_OK) {
    std::fprintf(stderr, "kolo-soak: kolo_init: %s\n", kolo_last_error());
    return 1;
  }
  const int rank = kolo_rank(), size = kolo_size();
  Soak soak(o, rank, size);
  std::vector<std::mt19937_64> rngs;
  for (int t = 0; t < o.threads; ++t) rngs.emplace_back(o.seed * 1000003 + t);

  const int64_t warmup = std::min(o.warmup, o.ops);
  run_phase(&soak, o, warmup, &rngs);
  const double rss_start = rss_mb();
  const auto t0 = std::chrono::steady_clock::now();
  run_phase(&soak, o, o.ops - warmup, &rngs);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double rss_end = rss_mb();

  const double max_growth = max_over_ranks(rss_end - rss_start, "soak/rss_growth");
  const double failures = max_over_ranks(static_cast<double>(soak.failures()), "soak/failures");
  const bool pass = failures == 0 && max_growth < o.max_rss_growth_mb;
  if (rank == 0) {
    std::printf("kolo-soak: %s ranks %d threads %d ops %lld (warm-up %lld) time %.1f s  rss start "
                "%.1f MB end %.1f MB (rank 0), largest growth over ranks %.2f MB (limit %.1f)  "
                "wrong results %.0f\n",
                pass ? "PASS" : "FAILED", size, o.threads, static_cast<long long>(o.ops),
                static_cast<long long>(warmup), seconds, rss_start, rss_end, max_growth,
                o.max_rss_growth_mb, failures);
  }
  kolo_shutdown();
  return pass ? 0 : 1;
}
