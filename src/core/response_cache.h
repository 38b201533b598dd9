// ResponseCache: negotiated responses remembered by name, so that a name seen
// before costs one bit in a bitwise-AND instead of a round trip through rank 0.
//
// Invariant: the cache is identical on every rank. It changes only in ways every
// rank performs in the same order within a cycle — put() of negotiated responses
// in their broadcast order, erase() of bits the AND declared invalid, touch() of
// bits the AND declared ready — and eviction is a deterministic function of that
// history (least recently touched first; free bits reused lowest first).
// Coordinator thread only.
#pragma once

#include <cstdint>
#include <list>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/request.h"

namespace kolo::core {

class ResponseCache {
 public:
  explicit ResponseCache(size_t capacity);

  size_t capacity() const { return capacity_; }
  size_t size() const { return by_name_.size(); }

  enum class Lookup {
    kMiss,   // name not cached
    kHit,    // cached with identical parameters: *bit is its bit
    kStale,  // cached with other parameters: *bit must be invalidated everywhere
  };
  Lookup lookup(const Request& request, uint32_t* bit) const;

  // The response cached at `bit` (which must be occupied).
  const Response& at(uint32_t bit) const;
  bool occupied(uint32_t bit) const { return bit < slots_.size() && slots_[bit].has_value(); }

  // Caches an OK response (replacing one of the same name). When full, evicts the
  // least recently touched entry first and reports its bit in *evicted.
  void put(const Response& response, std::optional<uint32_t>* evicted);

  void erase(uint32_t bit);
  void touch(uint32_t bit);

 private:
  size_t capacity_;
  std::vector<std::optional<Response>> slots_;  // by bit
  std::unordered_map<std::string, uint32_t> by_name_;
  std::list<uint32_t> lru_;  // front = least recently touched
  std::vector<std::list<uint32_t>::iterator> lru_pos_;
};

}  // namespace kolo::core
