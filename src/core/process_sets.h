// ProcessSets: one rank's table of process sets (Note [A process set is a world]
// in transport/world.h) — the ids every rank agrees on, each set's members, and
// on the members the set's own Runtime over the set's own world.
//
// Contract: owned by the global set's Runtime. add() and remove() are collective
// over every rank of the global set, in the same order on every rank (they
// agree through an allgather in the global set, so other sets' work goes on
// meanwhile); they are serialised per process. find() may be called from any
// thread at any time. Every error add() or remove() reports is reported alike on
// every rank, and leaves the table as it was.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/knobs.h"
#include "common/status.h"
#include "transport/world.h"

namespace kolo::core {

class Runtime;

struct ProcessSet {
  int32_t id = 0;
  std::vector<int> ranks;            // global ranks, ascending; rank i of the set is ranks[i]
  std::shared_ptr<Runtime> runtime;  // the set's kolo; null where this rank is not a member

  // This rank's rank in the set, or -1.
  int rank_of(int global_rank) const;
};

class ProcessSets {
 public:
  // `global` outlives this table; `make` builds a set's world from the global one.
  ProcessSets(Runtime& global, transport::MakeSubset make, const Config& config, int rank,
              int size);
  ~ProcessSets();

  // Adds the set of `ranks` (any order; every rank passes the same members) and
  // returns its id (1, 2, ... in order of addition; never reused). `local_error`
  // non-empty: this rank's arguments were unusable (it still takes part, so that
  // every rank fails alike).
  Status add(std::vector<int> ranks, const std::string& local_error, int32_t* id);

  // Removes set `id` (not 0) once no rank has operations in flight in it: its
  // members stop its runtime together. Every rank passes the same id.
  Status remove(int32_t id);

  // The set `id` (0 is the global set); an unknown or removed id is an error.
  Status find(int32_t id, std::shared_ptr<const ProcessSet>* out) const;

  // Stops every set's runtime (the global set's shutdown).
  void shutdown();

 private:
  // Every rank's `mine`, in rank order, through an allgather in the global set.
  Status exchange(const std::vector<int32_t>& mine, std::vector<std::vector<int32_t>>* all);
  // The one verdict on what every rank passed to add(); OK or the error.
  Status check_add(const std::vector<std::vector<int32_t>>& all, std::vector<int>* ranks) const;
  Status check_remove(int32_t id, const std::vector<std::vector<int32_t>>& all) const;
  Status start_member(int32_t id, const std::vector<int>& ranks, std::shared_ptr<Runtime>* out);

  Runtime& global_;
  transport::MakeSubset make_;
  const Config config_;
  const int rank_;
  const int size_;
  std::mutex change_mu_;  // add() and remove(), one at a time
  mutable std::mutex mu_;  // sets_
  std::map<int32_t, std::shared_ptr<const ProcessSet>> sets_;
  int32_t next_id_ = 1;
  uint64_t exchanges_ = 0;
};

}  // namespace kolo::core
