// init_probe: kolo_init under a launch where the ranks' environments may differ
// (mpiexec's MPMD form, `-n 1 -env KOLO_X a prog : -n 1 prog`), through the public
// C API as a user's program would call it.
//
//   init_probe ok [OPS]            kolo_init must succeed on this rank; then OPS
//                                  (default 20) allreduces of random dtype, op and
//                                  size, all in flight at once (so they fuse), must
//                                  be exact on this rank
//   init_probe fail TEXT...        kolo_init must fail on this rank within
//                                  kWithinSeconds, with a message that contains every
//                                  TEXT and no source location (no "*.cc:" or "/src/")
//
// Exit code 0 when this rank saw what was expected. Every rank prints one line.
#include <kolo/kolo.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

// A hang is caught by CTest's timeout; "promptly" is this (init takes well under a
// second when it succeeds).
constexpr double kWithinSeconds = 20.0;

std::string launcher_rank() {
  const char* v = std::getenv("PMI_RANK");
  return v ? v : "?";
}

// Every rank draws the same sequence of tensors; rank r's element i is a multiple
// of the world size (so AVERAGE is exact too) that depends on r and i.
struct Tensor {
  kolo_dtype_t dtype;
  kolo_op_t op;
  int64_t count;
  std::vector<double> in, want;
  std::vector<unsigned char> in_bytes, out_bytes;
};

double value(int rank, int size, int64_t i) { return size * (((rank * 7 + i * 3) % 11) - 5.0); }

double reduce(kolo_op_t op, int size, int64_t i) {
  double acc = value(0, size, i);
  for (int r = 1; r < size; ++r) {
    const double v = value(r, size, i);
    if (op == KOLO_OP_SUM || op == KOLO_OP_AVERAGE) acc += v;
    if (op == KOLO_OP_MIN) acc = std::fmin(acc, v);
    if (op == KOLO_OP_MAX) acc = std::fmax(acc, v);
  }
  return op == KOLO_OP_AVERAGE ? acc / size : acc;
}

template <typename T>
void pack(const std::vector<double>& v, std::vector<unsigned char>* bytes) {
  bytes->resize(v.size() * sizeof(T));
  for (size_t i = 0; i < v.size(); ++i) {
    const T x = static_cast<T>(v[i]);
    std::memcpy(bytes->data() + i * sizeof(T), &x, sizeof(T));
  }
}

template <typename T>
double unpack(const std::vector<unsigned char>& bytes, int64_t i) {
  T x;
  std::memcpy(&x, bytes.data() + i * sizeof(T), sizeof(T));
  return static_cast<double>(x);
}

void pack_any(kolo_dtype_t d, const std::vector<double>& v, std::vector<unsigned char>* b) {
  if (d == KOLO_INT32) pack<int32_t>(v, b);
  if (d == KOLO_INT64) pack<int64_t>(v, b);
  if (d == KOLO_FLOAT32) pack<float>(v, b);
  if (d == KOLO_FLOAT64) pack<double>(v, b);
}

double unpack_any(kolo_dtype_t d, const std::vector<unsigned char>& b, int64_t i) {
  if (d == KOLO_INT32) return unpack<int32_t>(b, i);
  if (d == KOLO_INT64) return unpack<int64_t>(b, i);
  if (d == KOLO_FLOAT32) return unpack<float>(b, i);
  return unpack<double>(b, i);
}

// OPS allreduces in flight at once; returns the number of wrong tensors.
int run_allreduces(int ops) {
  const int rank = kolo_rank(), size = kolo_size();
  std::mt19937 rng(12345);  // the same draws on every rank
  const kolo_dtype_t dtypes[] = {KOLO_INT32, KOLO_INT64, KOLO_FLOAT32, KOLO_FLOAT64};
  const kolo_op_t ops_list[] = {KOLO_OP_SUM, KOLO_OP_AVERAGE, KOLO_OP_MIN, KOLO_OP_MAX};
  std::vector<Tensor> tensors(ops);
  std::vector<kolo_handle_t> handles(ops, nullptr);
  for (int t = 0; t < ops; ++t) {
    Tensor& x = tensors[t];
    x.dtype = dtypes[rng() % 4];
    x.op = ops_list[rng() % 4];
    x.count = 1 + static_cast<int64_t>(rng() % 50000);
    for (int64_t i = 0; i < x.count; ++i) x.in.push_back(value(rank, size, i));
    pack_any(x.dtype, x.in, &x.in_bytes);
    x.out_bytes.assign(x.in_bytes.size(), 0);
    const std::string name = "probe." + std::to_string(t);
    kolo_status_t s = kolo_allreduce_async(name.c_str(), x.in_bytes.data(), x.out_bytes.data(),
                                           x.count, x.dtype, x.op, 1.0, 1.0, KOLO_CPU_DEVICE,
                                           &handles[t]);
    if (s != KOLO_OK) {
      std::printf("[rank %d] %s: %s\n", rank, name.c_str(), kolo_last_error());
      return ops;
    }
  }
  int wrong = 0;
  for (int t = 0; t < ops; ++t) {
    const Tensor& x = tensors[t];
    const kolo_status_t s = kolo_wait(handles[t], 60.0);
    int64_t bad = 0;
    for (int64_t i = 0; i < x.count && s == KOLO_OK; ++i)
      if (unpack_any(x.dtype, x.out_bytes, i) != reduce(x.op, size, i)) ++bad;
    if (s != KOLO_OK || bad > 0) {
      ++wrong;
      std::printf("[rank %d] probe.%d: %s (%s), %lld of %lld elements wrong\n", rank, t,
                  kolo_status_string(s), kolo_handle_message(handles[t]),
                  static_cast<long long>(bad), static_cast<long long>(x.count));
    }
    kolo_handle_release(handles[t]);
  }
  return wrong;
}

bool has_source_location(const std::string& m) {
  return m.find(".cc:") != std::string::npos || m.find(".h:") != std::string::npos ||
         m.find("/src/") != std::string::npos;
}

int expect_failure(kolo_status_t s, double seconds, const std::string& message, int argc,
                   char** argv) {
  int errors = 0;
  if (s == KOLO_OK) {
    std::printf("[rank %s] expected kolo_init to fail; it succeeded\n", launcher_rank().c_str());
    if (kolo_shutdown() != KOLO_OK) std::printf("kolo_shutdown: %s\n", kolo_last_error());
    return 1;
  }
  if (seconds > kWithinSeconds) {
    std::printf("[rank %s] kolo_init took %.1f s to fail\n", launcher_rank().c_str(), seconds);
    ++errors;
  }
  for (int i = 2; i < argc; ++i) {
    if (message.find(argv[i]) == std::string::npos) {
      std::printf("[rank %s] the message lacks \"%s\"\n", launcher_rank().c_str(), argv[i]);
      ++errors;
    }
  }
  if (has_source_location(message)) {
    std::printf("[rank %s] the message names a source file\n", launcher_rank().c_str());
    ++errors;
  }
  return errors == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const bool want_ok = argc >= 2 && std::strcmp(argv[1], "ok") == 0;
  const bool want_fail = argc >= 2 && std::strcmp(argv[1], "fail") == 0;
  if (!want_ok && !want_fail) {
    std::fprintf(stderr, "usage: %s ok [OPS] | fail TEXT...\n", argv[0]);
    return 2;
  }
  const auto start = std::chrono::steady_clock::now();
  const kolo_status_t s = kolo_init();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::string message = kolo_last_error();
  std::printf("[rank %s] kolo_init: %s after %.2f s%s%s\n", launcher_rank().c_str(),
              kolo_status_string(s), seconds, message.empty() ? "" : ": ", message.c_str());
  std::fflush(stdout);
  if (want_fail) return expect_failure(s, seconds, message, argc, argv);
  if (s != KOLO_OK) return 1;
  const int ops = argc >= 3 ? std::atoi(argv[2]) : 20;
  const int wrong = run_allreduces(ops);
  std::printf("[rank %d] %d of %d allreduces exact\n", kolo_rank(), ops - wrong, ops);
  const kolo_status_t down = kolo_shutdown();
  if (down != KOLO_OK) std::printf("kolo_shutdown: %s\n", kolo_last_error());
  return wrong == 0 && down == KOLO_OK ? 0 : 1;
}
