// kolo_sets.hpp — kolo.hpp's process sets (kolo.hpp includes this header; include
// kolo.hpp, not this).
#ifndef KOLO_KOLO_SETS_HPP_
#define KOLO_KOLO_SETS_HPP_

#include <kolo/kolo.hpp>

#include <vector>

namespace kolo {

// ---- process sets ---------------------------------------------------------------
//
// A process set (see kolo.h): a subset of the ranks with its own negotiation.
// Pass set.options() (or an Options with process_set = set.id()) to run a
// collective in it. A ProcessSet is only its id: copying it copies the id, and
// destroying it removes nothing (removal is collective: remove_process_set).
class ProcessSet {
 public:
  ProcessSet() noexcept = default;  // the global set
  explicit ProcessSet(std::int32_t id) noexcept : id_(id) {}

  std::int32_t id() const noexcept { return id_; }
  // This rank's rank in the set, -1 when not a member (or the id is unknown).
  int rank() const noexcept { return kolo_process_set_rank(id_); }
  // The set's size, -1 for an unknown id.
  int size() const noexcept { return kolo_process_set_size(id_); }
  bool included() const noexcept { return kolo_process_set_included(id_) == 1; }
  // The members' global ranks, ascending; throws Error for an unknown id.
  std::vector<int> ranks() const {
    int size = 0;
    detail::check(kolo_process_set_ranks(id_, nullptr, 0, &size), "kolo::ProcessSet::ranks");
    std::vector<int> members(static_cast<size_t>(size));
    detail::check(kolo_process_set_ranks(id_, members.data(), size, &size),
                  "kolo::ProcessSet::ranks");
    return members;
  }
  // Options that run a collective in this set.
  Options options() const {
    Options o;
    o.process_set = id_;
    return o;
  }

 private:
  std::int32_t id_ = 0;
};

// Adds the set of `ranks` (global ranks, any order): collective over every rank,
// each passing the same members (see kolo_process_set_add). Non-throwing form:
// on failure *set is the global set and kolo_last_error() says why.
inline kolo_status_t add_process_set(const std::vector<int>& ranks, ProcessSet* set) noexcept {
  if (set == nullptr) return KOLO_ERR_INVALID_ARGUMENT;
  *set = ProcessSet();
  std::int32_t id = 0;
  const kolo_status_t status =
      kolo_process_set_add(ranks.data(), static_cast<int>(ranks.size()), &id);
  if (status == KOLO_OK) *set = ProcessSet(id);
  return status;
}

inline ProcessSet add_process_set(const std::vector<int>& ranks) {
  ProcessSet set;
  detail::check(add_process_set(ranks, &set), "kolo::add_process_set");
  return set;
}

// Removes the set: collective over every rank (see kolo_process_set_remove).
inline void remove_process_set(const ProcessSet& set) {
  detail::check(kolo_process_set_remove(set.id()), "kolo::remove_process_set");
}

}  // namespace kolo

#endif  // KOLO_KOLO_SETS_HPP_
