// MessageTable: rank 0's record of which ranks have asked for which names, on the
// slow path of negotiation; and the stall inspector that reads it.
//
// A name becomes ready when every rank has asked for it; rank 0 then validates the
// requests (see Note [What ranks must agree on] in request.h) and broadcasts the
// response. A name that only some ranks ask for waits; the stall inspector reports
// it (which ranks are missing which names) and, if configured, fails it.
// Rank 0's coordinator thread only.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/request.h"

namespace kolo::core {

class MessageTable {
 public:
  using Clock = std::chrono::steady_clock;

  explicit MessageTable(int world_size) : world_size_(world_size) {}

  // Records rank's request and returns the responses it makes ready: the
  // validated response for the name once every rank has asked for it (the name is
  // then forgotten), errors, and — for a join — what the join releases. See
  // Note [Join]. A rank asking twice for a pending name replaces its request.
  std::vector<Response> add(int rank, Request request, Clock::time_point now);

  struct Stall {
    std::string name;
    std::vector<int> missing_ranks;
    double waited_seconds;
  };
  // Names waiting for longer than `older_than`, oldest first.
  std::vector<Stall> stalls(Clock::time_point now, double older_than_seconds) const;

  // Forgets the names (after failing them) and returns a kStalled response for each.
  std::vector<Response> fail_stalled(const std::vector<Stall>& stalls);

  size_t pending() const { return pending_.size(); }

 private:
  struct Pending {
    std::vector<std::optional<Request>> by_rank;
    int arrived = 0;
    Clock::time_point first_seen;
  };
  bool complete(const Pending& p, Collective c) const;
  Response finish(std::map<std::string, Pending>::iterator it);
  std::vector<Response> join(int rank, Request request, Clock::time_point now);

  int world_size_;
  std::map<std::string, Pending> pending_;
  std::vector<bool> joined_;  // by rank
  int joined_count_ = 0;
};

// Note [Join]
// A rank that runs out of data joins (Horovod's hvd.join). From then until every
// rank has joined, an allreduce counts as submitted by the joined ranks, which
// contribute zeros (AVERAGE still divides by the full world size); every other
// collective fails on the ranks that submit it, because a joined rank cannot take
// part. When the last rank joins, every rank's join completes with that rank's
// number and the joined state is cleared.

// "Missing ranks: 1: [grad/w1, grad/b1]; 2: [grad/w1]" — Horovod's stall report
// shape, one line per call.
std::string describe_stalls(const std::vector<MessageTable::Stall>& stalls);

}  // namespace kolo::core
