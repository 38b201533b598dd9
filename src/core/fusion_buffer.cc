#include "core/fusion_buffer.h"

#include <cstdlib>
#include <cstring>
#include <new>

namespace kolo::core {

namespace {
constexpr size_t kAlignment = 4096;
}

FusionBuffer::FusionBuffer(size_t bytes) : size_(bytes) {
  if (bytes == 0) return;
  size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  data_ = static_cast<char*>(std::aligned_alloc(kAlignment, rounded));
  if (data_ == nullptr) throw std::bad_alloc();
  std::memset(data_, 0, rounded);  // fault every page in now, not on the first step
}

FusionBuffer::~FusionBuffer() { std::free(data_); }

}  // namespace kolo::core
