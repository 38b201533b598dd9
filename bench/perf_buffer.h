// A persistent, page-aligned buffer for benchmark data. Allocated once and written
// in full at construction: on this kind of VM the first touch of a page costs far
// more than the collective being measured, so no timed loop may pay for it.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace kolo::bench {

class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(size_t bytes) : bytes_(bytes) {
    if (bytes == 0) return;
    void* p = nullptr;
    if (posix_memalign(&p, 4096, bytes) != 0) std::abort();
    std::memset(p, 0, bytes);  // touch every page now
    data_ = static_cast<char*>(p);
  }
  ~Buffer() { std::free(data_); }
  Buffer(Buffer&& other) noexcept : data_(other.data_), bytes_(other.bytes_) {
    other.data_ = nullptr;
    other.bytes_ = 0;
  }
  Buffer& operator=(Buffer&& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(bytes_, other.bytes_);
    return *this;
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  char* data() const { return data_; }
  size_t bytes() const { return bytes_; }

 private:
  char* data_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace kolo::bench
