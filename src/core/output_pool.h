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

namespace kolo::core {

class OutputPool;

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

  std::unique_ptr<char[]> block_;
  std::shared_ptr<char> external_;
  size_t capacity_ = 0;
  size_t size_ = 0;
  std::shared_ptr<OutputPool> pool_;
};

class OutputPool : public std::enable_shared_from_this<OutputPool> {
 public:
  static constexpr size_t kKeepBlocks = 4;

  // A buffer of `bytes`: the smallest free block that fits, else a new one.
  OutputBuffer take(size_t bytes);

 private:
  friend class OutputBuffer;
  struct Block {
    std::unique_ptr<char[]> data;
    size_t capacity;
  };
  void give(std::unique_ptr<char[]> block, size_t capacity);

  std::mutex mu_;
  std::vector<Block> free_;
};

}  // namespace kolo::core
