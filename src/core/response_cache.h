// ResponseCache: negotiated responses remembered by name, so that a name seen
// before costs one bit in a bitwise-AND instead of a round trip through rank 0.
//
// Invariant: the cache is identical on every rank. It changes only in ways every
// rank performs in the same order within a cycle — put() of negotiated responses
// in their broadcast order, erase() of bits the AND declared invalid, touch() of
// bits the AND declared ready — and eviction is a deterministic function of that
// history (least recently touched first; free bits reused lowest first).
// Collectives whose sizes differ per rank (allgather, alltoall) also remember
// this rank's own parameters per entry, the one thing that differs between
// ranks: see Note [Caching per-rank sizes].
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
  // One past the highest bit ever occupied (0 before the first put): every bit
  // in use is below it. It only grows, and only through put(), which every rank
  // calls alike (free bits are reused lowest first), so it is the same on every
  // rank between cycles.
  size_t high_water() const { return high_water_; }

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
  // least recently touched entry first and reports its bit in *evicted. `own`:
  // this rank's request parameters for the name, which lookup() compares for
  // collectives with per-rank sizes (null: the response's; such an entry then
  // never hits on a rank whose parameters differ from rank 0's).
  void put(const Response& response, std::optional<uint32_t>* evicted,
           const TensorParams* own = nullptr);

  void erase(uint32_t bit);
  void touch(uint32_t bit);

 private:
  struct Entry {
    Response response;
    TensorParams own;  // what lookup() compares a request with
  };
  size_t capacity_;
  size_t high_water_ = 0;
  std::vector<std::optional<Entry>> slots_;  // by bit
  std::unordered_map<std::string, uint32_t> by_name_;
  std::list<uint32_t> lru_;  // front = least recently touched
  std::vector<std::list<uint32_t>::iterator> lru_pos_;
};

// Note [Caching per-rank sizes]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// An allgather's response carries every rank's rows, and its parameters are rank
// 0's, so comparing a request with them would make every other rank's hit a
// stale entry. Each rank instead compares with the parameters it sent itself when
// the response was negotiated. If every rank hits (the AND says so), every rank
// submits exactly what it did then, so the cached rows of every rank are still
// right; a rank whose rows changed finds its entry stale, the AND evicts it on
// every rank, and the name is negotiated again (where mismatches are found). The
// bits stay identical on every rank: only what each rank compares with differs.
// Without it a 4 KiB allgather paid a gather and a broadcast over MPI per call.

}  // namespace kolo::core
