#include "core/output_pool.h"

#include <algorithm>

namespace kolo::core {

OutputBuffer& OutputBuffer::operator=(OutputBuffer&& other) {
  if (this != &other) {
    give_back();
    block_ = std::move(other.block_);
    external_ = std::move(other.external_);
    capacity_ = other.capacity_;
    size_ = other.size_;
    pool_ = std::move(other.pool_);
    other.capacity_ = other.size_ = 0;
  }
  return *this;
}

void BlockFree::operator()(char* p) const {
  if (release != nullptr)
    (void)release(p);  // the block came from it; nothing to do should it refuse
  else
    delete[] p;
}

OutputBuffer::~OutputBuffer() { give_back(); }

void OutputBuffer::give_back() {
  if (block_ && pool_) pool_->give(std::move(block_), capacity_);
  block_.reset();
  external_.reset();
  pool_.reset();
  capacity_ = size_ = 0;
}

OutputBuffer OutputPool::take(size_t bytes) {
  OutputBuffer out;
  out.size_ = bytes;
  out.pool_ = shared_from_this();
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto best = free_.end();
    for (auto it = free_.begin(); it != free_.end(); ++it)
      if (it->capacity >= bytes && (best == free_.end() || it->capacity < best->capacity)) best = it;
    if (best != free_.end()) {
      out.block_ = std::move(best->data);
      out.capacity_ = best->capacity;
      free_.erase(best);
      return out;
    }
  }
  out.capacity_ = std::max<size_t>(bytes, 1);
  void* shared = nullptr;
  if (shared_.allocate != nullptr && bytes >= kSharedMinBytes &&
      shared_.allocate(out.capacity_, &shared).ok()) {
    out.block_ = Block(static_cast<char*>(shared), BlockFree{shared_.release});
    return out;
  }
  out.block_.reset(new char[out.capacity_]);  // uninitialised: the collective writes it all
  return out;
}

void OutputPool::give(Block block, size_t capacity) {
  std::lock_guard<std::mutex> lock(mu_);
  free_.push_back(Free{std::move(block), capacity});
  if (free_.size() > kKeepBlocks) {  // drop the smallest: large ones are the costly ones
    auto smallest = std::min_element(free_.begin(), free_.end(), [](const Free& a, const Free& b) {
      return a.capacity < b.capacity;
    });
    free_.erase(smallest);
  }
}

}  // namespace kolo::core
