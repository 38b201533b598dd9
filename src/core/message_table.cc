#include "core/message_table.h"

#include <algorithm>
#include <sstream>

namespace kolo::core {

bool MessageTable::complete(const Pending& p, Collective c) const {
  for (int r = 0; r < world_size_; ++r)
    if (!p.by_rank[r] && !(joined_[r] && is_allreduce(c))) return false;
  return true;
}

Response MessageTable::finish(std::map<std::string, Pending>::iterator it) {
  Response r = validate(it->second.by_rank);
  pending_.erase(it);
  return r;
}

std::vector<Response> MessageTable::add(int rank, Request request, Clock::time_point now) {
  if (joined_.empty()) joined_.assign(world_size_, false);
  const Collective c = request.params.collective;
  if (c == Collective::kJoin) return join(rank, std::move(request), now);
  if (joined_count_ > 0 && !is_allreduce(c)) {
    Response err{request.name, request.params, Code::kInvalidArgument,
                 "tensor '" + request.name + "': " + collective_name(c) +
                     " cannot run while ranks have joined (only allreduce can: joined "
                     "ranks contribute zeros); call it after every rank's join returns",
                 {}, {}, -1};
    return {err};
  }
  auto [it, inserted] = pending_.try_emplace(request.name);
  Pending& p = it->second;
  if (inserted) {
    p.by_rank.resize(world_size_);
    p.first_seen = now;
  }
  if (!p.by_rank[rank].has_value()) ++p.arrived;
  p.by_rank[rank] = std::move(request);
  if (!complete(p, c)) return {};
  return {finish(it)};
}

std::vector<Response> MessageTable::join(int rank, Request request, Clock::time_point now) {
  std::vector<Response> out;
  if (!joined_[rank]) {
    joined_[rank] = true;
    ++joined_count_;
  }
  // What the join releases: allreduces now complete, every other collective fails.
  for (auto it = pending_.begin(); it != pending_.end();) {
    const std::optional<Request>* any = nullptr;
    for (const auto& r : it->second.by_rank)
      if (r) any = &r;
    if (!any || (*any)->params.collective == Collective::kJoin) {
      ++it;
      continue;
    }
    const Collective c = (*any)->params.collective;
    if (!is_allreduce(c)) {
      out.push_back(Response{it->first, (*any)->params, Code::kInvalidArgument,
                             "tensor '" + it->first + "': " + collective_name(c) + " failed: rank " +
                                 std::to_string(rank) + " joined before submitting it",
                             {}, {}, -1});
      it = pending_.erase(it);
    } else if (complete(it->second, c)) {
      auto done = it++;
      out.push_back(finish(done));
    } else {
      ++it;
    }
  }
  auto [it, inserted] = pending_.try_emplace(request.name);
  Pending& p = it->second;
  if (inserted) {
    p.by_rank.resize(world_size_);
    p.first_seen = now;
  }
  if (!p.by_rank[rank]) ++p.arrived;
  p.by_rank[rank] = std::move(request);
  if (p.arrived == world_size_) {
    Response r = finish(it);
    r.last_joined = rank;
    out.push_back(std::move(r));
    joined_.assign(world_size_, false);
    joined_count_ = 0;
  }
  return out;
}

std::vector<MessageTable::Stall> MessageTable::stalls(Clock::time_point now,
                                                      double older_than_seconds) const {
  std::vector<Stall> out;
  for (const auto& [name, p] : pending_) {
    double waited = std::chrono::duration<double>(now - p.first_seen).count();
    if (waited < older_than_seconds) continue;
    Stall s{name, {}, waited};
    for (int r = 0; r < world_size_; ++r)
      if (!p.by_rank[r].has_value()) s.missing_ranks.push_back(r);
    out.push_back(std::move(s));
  }
  std::sort(out.begin(), out.end(),
            [](const Stall& a, const Stall& b) { return a.waited_seconds > b.waited_seconds; });
  return out;
}

std::vector<Response> MessageTable::fail_stalled(const std::vector<Stall>& stalls) {
  std::vector<Response> out;
  for (const Stall& s : stalls) {
    auto it = pending_.find(s.name);
    if (it == pending_.end()) continue;
    Response r;
    r.name = s.name;
    for (const auto& req : it->second.by_rank)
      if (req.has_value()) r.params = req->params;
    r.code = Code::kStalled;
    std::ostringstream os;
    os << "tensor '" << s.name << "' was submitted by only some ranks and waited "
       << static_cast<int>(s.waited_seconds) << " s (KOLO_STALL_SHUTDOWN_TIME_SECONDS); missing ranks:";
    for (int m : s.missing_ranks) os << " " << m;
    r.message = os.str();
    out.push_back(std::move(r));
    pending_.erase(it);
  }
  return out;
}

std::string describe_stalls(const std::vector<MessageTable::Stall>& stalls) {
  std::map<int, std::vector<std::string>> by_rank;
  for (const auto& s : stalls)
    for (int r : s.missing_ranks) by_rank[r].push_back(s.name);
  std::ostringstream os;
  os << "one or more tensors were submitted by only a subset of ranks and are waiting "
        "for the rest. Missing ranks: ";
  bool first = true;
  for (const auto& [rank, names] : by_rank) {
    os << (first ? "" : "; ") << rank << ": [";
    first = false;
    for (size_t i = 0; i < names.size() && i < 8; ++i) os << (i ? ", " : "") << names[i];
    if (names.size() > 8) os << ", ... (" << names.size() - 8 << " more)";
    os << "]";
  }
  return os.str();
}

}  // namespace kolo::core
