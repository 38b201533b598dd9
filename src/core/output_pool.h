// OutputPool: recycled storage for the outputs kolo allocates (allgather,
// alltoall), so that a step's output does not pay for freshly mapped pages every
// time (docs/design.md, Rules, 7; in this VM first-touch page faults cost more
// than the copy). A buffer handed out returns its block to the pool when the handle
// that owns it is released; the pool keeps a few blocks and frees the rest.
// take(): coordinator thread; a buffer may be destroyed on any thread.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

#include "transport/host_memory.h"

namespace kolo::core {

class OutputPool;

// Frees a host block the way it was allocated: with `release` (kolo_alloc's
// memory), or delete[] when that is null.
struct BlockFree {
  Status (*release)(void*) = nullptr;
  void operator()(char* p) const;
};
using Block = std::unique_ptr<char, BlockFree>;

// A block of at least size() bytes, owned by one handle.
class OutputBuffer {
 public:
  OutputBuffer() = default;
  // A block allocated elsewhere (device memory from the device transport), freed
  // by its own deleter when the buffer goes; never pooled.
  OutputBuffer(std::shared_ptr<char> external, size_t size)
      : external_(std::move(external)), size_(size) {}
  OutputBuffer(OutputBuffer&&) = default;
  OutputBuffer& operator=(OutputBuffer&& other);
  ~OutputBuffer();

  char* data() { return external_ ? external_.get() : block_.get(); }
  const char* data() const { return external_ ? external_.get() : block_.get(); }
  size_t size() const { return size_; }

 private:
  friend class OutputPool;
  void give_back();

  Block block_;
  std::shared_ptr<char> external_;
  size_t capacity_ = 0;
  size_t size_ = 0;
  std::shared_ptr<OutputPool> pool_;
};

// Note [Outputs the peers can map]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Where the world's ranks share a node, blocks of kSharedMinBytes or more come
// from the world's HostMemory (kolo_alloc's memfd memory), so that the node's
// engine can write into an allgather's outputs from the peers (Note [An
// allgather pushes its block] in transports/shm/collectives_choices.cc). Only
// large blocks: each is a memfd and a mapping of its own, and every free of
// one moves its owner's free count, after which the peers map all of that
// owner's kolo_alloc memory anew (shared_alloc.h); below kSharedMinBytes the
// push does not pay (docs/perf/kolo-memory.md, "An allgather pushes its block").
// Should the allocation fail, the block comes from the heap.
class OutputPool : public std::enable_shared_from_this<OutputPool> {
 public:
  static constexpr size_t kKeepBlocks = 4;
  static constexpr size_t kSharedMinBytes = size_t{16} << 20;

  explicit OutputPool(transport::HostMemory shared = {}) : shared_(shared) {}

  // A buffer of `bytes`: the smallest free block that fits, else a new one.
  OutputBuffer take(size_t bytes);

 private:
  friend class OutputBuffer;
  struct Free {
    Block data;
    size_t capacity;
  };
  void give(Block block, size_t capacity);

  const transport::HostMemory shared_;
  std::mutex mu_;
  std::vector<Free> free_;
};

}  // namespace kolo::core
