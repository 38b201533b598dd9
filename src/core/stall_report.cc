#include "core/stall_report.h"

#include <cstdio>
#include <set>
#include <sstream>

namespace kolo::core {
namespace {

constexpr size_t kNamesShown = 4;

// The names `rank` has in flight that at least one other rank does not.
std::vector<std::string> pending_instead(int rank, const std::vector<RankReport>& reports) {
  std::vector<std::set<std::string>> by_rank;
  for (const RankReport& r : reports) by_rank.emplace_back(r.pending.begin(), r.pending.end());
  std::vector<std::string> out;
  for (const std::string& name : reports[rank].pending) {
    for (size_t q = 0; q < reports.size(); ++q) {
      if (static_cast<int>(q) != rank && by_rank[q].count(name) == 0) {
        out.push_back(name);
        break;
      }
    }
  }
  return out;
}

std::string seconds_text(double s) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f", s);
  return text;
}

void describe_rank(std::ostringstream& os, int rank, const std::vector<RankReport>& reports) {
  const RankReport& report = reports[rank];
  const std::vector<std::string> instead = pending_instead(rank, reports);
  os << "rank " << rank;
  if (instead.empty()) {
    os << " has nothing else in flight";
  } else {
    os << " submitted instead [";
    for (size_t i = 0; i < instead.size() && i < kNamesShown; ++i)
      os << (i ? ", " : "") << instead[i];
    if (instead.size() > kNamesShown) os << ", ... (" << instead.size() - kNamesShown << " more)";
    os << "]";
  }
  if (report.idle_seconds < 0)
    os << " and has submitted nothing since kolo_init";
  else
    os << " and has been idle for " << seconds_text(report.idle_seconds)
       << " s since its last submission";
}

}  // namespace

std::string describe_stalls(const std::vector<MessageTable::Stall>& stalls,
                            const std::vector<RankReport>& reports) {
  std::string text = describe_stalls(stalls);
  if (reports.empty()) return text;
  std::set<int> missing;
  for (const auto& s : stalls)
    for (int r : s.missing_ranks)
      if (r >= 0 && r < static_cast<int>(reports.size())) missing.insert(r);
  std::ostringstream os;
  os << text << ". Meanwhile: ";
  bool first = true;
  for (int r : missing) {
    os << (first ? "" : "; ");
    first = false;
    describe_rank(os, r, reports);
  }
  return os.str();
}

}  // namespace kolo::core
