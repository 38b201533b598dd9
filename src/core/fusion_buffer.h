// FusionBuffer: the persistent host buffer that fused buckets are packed into.
//
// Allocated once at init with the fusion threshold's size and touched then
// (docs/design.md, Rules, 7: first-touch page faults are expensive, so they are
// paid once, not per step). Coordinator thread only.
#pragma once

#include <cstddef>
#include <memory>

namespace kolo::core {

class FusionBuffer {
 public:
  explicit FusionBuffer(size_t bytes);
  ~FusionBuffer();
  FusionBuffer(const FusionBuffer&) = delete;
  FusionBuffer& operator=(const FusionBuffer&) = delete;

  char* data() { return data_; }
  size_t size() const { return size_; }

 private:
  char* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace kolo::core
