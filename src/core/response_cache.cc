#include "core/response_cache.h"

#include "common/check.h"

namespace kolo::core {

ResponseCache::ResponseCache(size_t capacity)
    : capacity_(capacity), slots_(capacity), lru_pos_(capacity) {}

ResponseCache::Lookup ResponseCache::lookup(const Request& request, uint32_t* bit) const {
  auto it = by_name_.find(request.name);
  if (it == by_name_.end()) return Lookup::kMiss;
  *bit = it->second;
  return slots_[it->second]->own == request.params ? Lookup::kHit : Lookup::kStale;
}

const Response& ResponseCache::at(uint32_t bit) const {
  KOLO_CHECK(occupied(bit));
  return slots_[bit]->response;
}

void ResponseCache::put(const Response& response, std::optional<uint32_t>* evicted,
                        const TensorParams* own) {
  evicted->reset();
  if (capacity_ == 0) return;
  KOLO_CHECK(response.code == Code::kOk);
  Entry entry{response, own ? *own : response.params};
  auto existing = by_name_.find(response.name);
  if (existing != by_name_.end()) {
    uint32_t bit = existing->second;
    slots_[bit] = std::move(entry);
    touch(bit);
    return;
  }
  if (by_name_.size() == capacity_) {
    uint32_t victim = lru_.front();
    erase(victim);
    *evicted = victim;
  }
  uint32_t bit = 0;
  while (slots_[bit].has_value()) ++bit;  // lowest free bit; capacity is small
  high_water_ = std::max<size_t>(high_water_, bit + 1);
  slots_[bit] = std::move(entry);
  by_name_[response.name] = bit;
  lru_.push_back(bit);
  lru_pos_[bit] = std::prev(lru_.end());
}

void ResponseCache::erase(uint32_t bit) {
  KOLO_CHECK(occupied(bit));
  by_name_.erase(slots_[bit]->response.name);
  slots_[bit].reset();
  lru_.erase(lru_pos_[bit]);
}

void ResponseCache::touch(uint32_t bit) {
  KOLO_CHECK(occupied(bit));
  lru_.splice(lru_.end(), lru_, lru_pos_[bit]);
}

}  // namespace kolo::core
