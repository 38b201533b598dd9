#include "core/message_table.h"

#include <algorithm>
#include <sstream>

namespace kolo::core {

std::optional<Response> MessageTable::add(int rank, Request request, Clock::time_point now) {
  auto [it, inserted] = pending_.try_emplace(request.name);
  Pending& p = it->second;
  if (inserted) {
    p.by_rank.resize(world_size_);
    p.first_seen = now;
  }
  if (!p.by_rank[rank].has_value()) ++p.arrived;
  p.by_rank[rank] = std::move(request);
  if (p.arrived < world_size_) return std::nullopt;

  std::vector<Request> requests;
  requests.reserve(world_size_);
  for (auto& r : p.by_rank) requests.push_back(std::move(*r));
  pending_.erase(it);
  return validate(requests);
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
