// libkolo_torch_memory: PyTorch's CPU allocator, with tensors of at least a
// threshold in kolo_alloc memory, so that a large allreduce of a tensor (a DDP
// gradient bucket) is read by the node's other ranks in place (docs/design.md,
// "Memory kolo hands out"). Loaded by kolo.torch.use_kolo_memory() into a
// process that has imported torch (it links torch's libc10).
//
// Contract:
// - kolo_torch_memory_install(min_bytes) once per process, before the tensors it
//   should serve are made (a DDP model's buckets: before DistributedDataParallel);
//   later calls change the threshold only. Allocations below the threshold, and
//   every allocation that was served before, stay with the allocator that was in
//   place (torch's default).
// - Any thread (torch allocates and frees from its autograd and worker threads).
// - A freed block is kept for the next allocation of the same size, up to
//   kCacheBytes in all, beyond which it goes back with kolo_free: reusing blocks
//   keeps their pages touched (a fresh mapping's first touch is slow) and spares
//   the peers a new mapping (kolo_free makes them drop theirs).
#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <new>
#include <unordered_map>

#include "kolo/kolo.h"

namespace {

constexpr size_t kPage = 4096;
constexpr size_t kCacheBytes = size_t{512} << 20;

class KoloCpuAllocator final : public c10::Allocator {
 public:
  explicit KoloCpuAllocator(c10::Allocator* previous) : previous_(previous) {}

  void set_min_bytes(size_t bytes) { min_bytes_.store(bytes, std::memory_order_relaxed); }

  c10::DataPtr allocate(size_t n) const override {
    if (n < min_bytes_.load(std::memory_order_relaxed)) return previous_->allocate(n);
    void* p = take(n);
    return {p, p, &release, c10::Device(c10::DeviceType::CPU)};
  }

  c10::DeleterFnPtr raw_deleter() const override { return &release; }

  // Live and cached bytes (tests).
  void stats(int64_t* live, int64_t* cached) {
    std::lock_guard<std::mutex> lock(mu_);
    *live = static_cast<int64_t>(live_bytes_);
    *cached = static_cast<int64_t>(cached_bytes_);
  }

 private:
  static size_t rounded(size_t n) { return (n + kPage - 1) / kPage * kPage; }

  void* take(size_t n) const {
    const size_t bytes = rounded(n == 0 ? 1 : n);
    std::lock_guard<std::mutex> lock(mu_);
    void* p = nullptr;
    auto it = cache_.find(bytes);
    if (it != cache_.end()) {
      p = it->second;
      cache_.erase(it);
      cached_bytes_ -= bytes;
    } else if (kolo_alloc(bytes, &p) != KOLO_OK) {
      throw std::bad_alloc();
    }
    live_[p] = bytes;
    live_bytes_ += bytes;
    return p;
  }

  static void release(void* p);
  void give_back(void* p);

  c10::Allocator* previous_;
  std::atomic<size_t> min_bytes_{SIZE_MAX};
  mutable std::mutex mu_;
  mutable std::unordered_map<void*, size_t> live_;  // guarded by mu_
  mutable std::multimap<size_t, void*> cache_;      // guarded by mu_: freed blocks by size
  mutable size_t live_bytes_ = 0, cached_bytes_ = 0;
};

KoloCpuAllocator* g_allocator = nullptr;  // set once, never freed (tensors may outlive anything)
std::mutex g_install_mu;

void KoloCpuAllocator::release(void* p) {
  if (p != nullptr) g_allocator->give_back(p);
}

void KoloCpuAllocator::give_back(void* p) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(p);
  if (it == live_.end()) return;  // not ours: cannot happen (only our DataPtrs name release)
  const size_t bytes = it->second;
  live_.erase(it);
  live_bytes_ -= bytes;
  if (cached_bytes_ + bytes <= kCacheBytes) {
    cache_.emplace(bytes, p);
    cached_bytes_ += bytes;
  } else {
    kolo_free(p);
  }
}

// The priority above torch's default (0), so that this allocator is the CPU one.
constexpr uint8_t kPriority = 1;

}  // namespace

extern "C" {

// Installs the allocator (first call) and sets the threshold: CPU tensors of at
// least min_bytes (> 0) come from kolo_alloc from now on. 0 on success, -1 on
// a threshold of 0.
__attribute__((visibility("default"))) int kolo_torch_memory_install(size_t min_bytes) {
  if (min_bytes == 0) return -1;
  std::lock_guard<std::mutex> lock(g_install_mu);
  if (g_allocator == nullptr) {
    g_allocator = new KoloCpuAllocator(c10::GetCPUAllocator());
    c10::SetCPUAllocator(g_allocator, kPriority);
  }
  g_allocator->set_min_bytes(min_bytes);
  return 0;
}

// Bytes in live tensors and in the cache of freed blocks; 0 and 0 before install.
__attribute__((visibility("default"))) void kolo_torch_memory_stats(int64_t* live,
                                                                    int64_t* cached) {
  *live = 0;
  *cached = 0;
  std::lock_guard<std::mutex> lock(g_install_mu);
  if (g_allocator != nullptr) g_allocator->stats(live, cached);
}

}  // extern "C"
