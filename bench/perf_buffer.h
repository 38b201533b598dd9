// A persistent, page-aligned buffer for benchmark data. Allocated once and written
// in full at construction: on this kind of VM the first touch of a page costs far
// more than the collective being measured, so no timed loop may pay for it.
// From the heap, or from kolo_alloc (memory the node's peers read in place).
#pragma once

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "kolo/kolo.h"

namespace kolo::bench {

class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(size_t bytes, bool from_kolo = false) : bytes_(bytes), from_kolo_(from_kolo) {
    if (bytes == 0) return;
    void* p = nullptr;
    if (from_kolo ? kolo_alloc(bytes, &p) != KOLO_OK : posix_memalign(&p, 4096, bytes) != 0)
      std::abort();
    std::memset(p, 0, bytes);  // touch every page now
    data_ = static_cast<char*>(p);
  }
  ~Buffer() {
    if (from_kolo_)
      kolo_free(data_);
    else
      std::free(data_);
  }
  Buffer(Buffer&& other) noexcept
      : data_(other.data_), bytes_(other.bytes_), from_kolo_(other.from_kolo_) {
    other.data_ = nullptr;
    other.bytes_ = 0;
  }
  Buffer& operator=(Buffer&& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(bytes_, other.bytes_);
    std::swap(from_kolo_, other.from_kolo_);
    return *this;
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  char* data() const { return data_; }
  size_t bytes() const { return bytes_; }

 private:
  char* data_ = nullptr;
  size_t bytes_ = 0;
  bool from_kolo_ = false;
};

}  // namespace kolo::bench
