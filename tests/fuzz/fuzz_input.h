// Shared by the fuzz targets (tests/fuzz/*_fuzz.cc): reading typed values from
// the fuzzer's bytes, and the check that turns a broken invariant into a crash
// the fuzzer records (and the replay test reports with the input's file name).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace kolo::fuzz {

// Aborts with the condition and a message: a violated invariant, not a bad input.
#define KOLO_FUZZ_CHECK(cond, ...)                                              \
  do {                                                                          \
    if (!(cond)) {                                                              \
      std::fprintf(stderr, "%s:%d: invariant failed: %s: ", __FILE__, __LINE__, \
                   #cond);                                                      \
      std::fprintf(stderr, __VA_ARGS__);                                        \
      std::fprintf(stderr, "\n");                                               \
      std::abort();                                                             \
    }                                                                           \
  } while (0)

// Reads values front to back; past the end every read yields zeros, so any
// input maps to some case.
class FuzzInput {
 public:
  FuzzInput(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  template <typename T>
  T take() {
    T v{};
    const size_t n = std::min(sizeof(T), size_ - pos_);
    std::memcpy(&v, data_ + pos_, n);
    pos_ += n;
    return v;
  }
  // A value in [lo, hi] (inclusive); hi >= lo.
  int64_t in_range(int64_t lo, int64_t hi) {
    const uint64_t span = static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo);
    const uint64_t raw = take<uint64_t>();
    if (span == UINT64_MAX) return static_cast<int64_t>(raw);
    return static_cast<int64_t>(static_cast<uint64_t>(lo) + raw % (span + 1));
  }
  // A string of up to max_length bytes (length byte first).
  std::string text(size_t max_length) {
    const size_t want = take<uint8_t>() % (max_length + 1);  // before size_ - pos_ is read
    const size_t n = std::min(want, size_ - pos_);
    std::string s(reinterpret_cast<const char*>(data_ + pos_), n);
    pos_ += n;
    return s;
  }
  // Everything not read yet.
  std::string rest() {
    std::string s(reinterpret_cast<const char*>(data_ + pos_), size_ - pos_);
    pos_ = size_;
    return s;
  }
  bool empty() const { return pos_ == size_; }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

}  // namespace kolo::fuzz

// The libFuzzer entry point each target defines.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
