#include "core/init_agreement.h"

#include <algorithm>

#include "common/logging.h"
#include "core/wire.h"

namespace kolo::core {
namespace {

// A message that lists every distinct value of a setting in a job of thousands of
// ranks would be unreadable; past this many, the rest are counted.
constexpr size_t kMaxGroupsShown = 4;

// Ranks grouped by a value, groups in the order of their lowest rank.
template <typename Value>
std::vector<std::pair<Value, std::vector<int>>> group_ranks(const std::vector<Value>& per_rank) {
  std::vector<std::pair<Value, std::vector<int>>> groups;
  for (int r = 0; r < static_cast<int>(per_rank.size()); ++r) {
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&](const auto& g) { return g.first == per_rank[r]; });
    if (it == groups.end()) {
      groups.push_back({per_rank[r], {r}});
    } else {
      it->second.push_back(r);
    }
  }
  return groups;
}

// "<a> on rank 0, <b> on ranks 1-2" (at most kMaxGroupsShown groups).
std::string describe_values(const std::vector<std::pair<std::string, std::vector<int>>>& groups) {
  std::string out;
  for (size_t i = 0; i < groups.size() && i < kMaxGroupsShown; ++i) {
    const std::string& value = groups[i].first;
    out += (i ? ", " : "") + (value.empty() ? std::string("(empty)") : value) + " on " +
           describe_ranks(groups[i].second);
  }
  if (groups.size() > kMaxGroupsShown)
    out += ", and " + std::to_string(groups.size() - kMaxGroupsShown) + " more values elsewhere";
  return out;
}

Status failed_ranks(const std::vector<Status>& statuses) {
  std::vector<std::string> messages(statuses.size());  // empty: this rank is fine
  Code code = Code::kOk;
  for (size_t r = 0; r < statuses.size(); ++r) {
    if (statuses[r].ok()) continue;
    if (code == Code::kOk) code = statuses[r].code();  // the lowest failing rank's
    messages[r] = statuses[r].message().empty() ? code_name(statuses[r].code())
                                                : statuses[r].message();
  }
  if (code == Code::kOk) return Status::OK();
  auto groups = group_ranks(messages);
  groups.erase(std::remove_if(groups.begin(), groups.end(),
                              [](const auto& g) { return g.first.empty(); }),
               groups.end());
  // "kolo_init failed on rank 1: <message>; on ranks 2-3: <other message>"
  std::string text;
  for (size_t i = 0; i < groups.size() && i < kMaxGroupsShown; ++i)
    text += (i ? "; on " : "kolo_init failed on ") + describe_ranks(groups[i].second) + ": " +
            groups[i].first;
  if (groups.size() > kMaxGroupsShown)
    text += "; and " + std::to_string(groups.size() - kMaxGroupsShown) + " other failures";
  return Status(code, text);
}

// Every entry name in first-seen order (rank 0's order first).
std::vector<std::string> entry_names(const std::vector<Fingerprint>& fingerprints) {
  std::vector<std::string> names;
  for (const Fingerprint& f : fingerprints)
    for (const KnobValue& e : f.entries)
      if (std::find(names.begin(), names.end(), e.name) == names.end()) names.push_back(e.name);
  return names;
}

std::string value_of(const Fingerprint& f, const std::string& name) {
  for (const KnobValue& e : f.entries)
    if (e.name == name) return e.value;
  return "(absent)";  // a build that does not know the setting
}

}  // namespace

Fingerprint fingerprint_of(const Config& config) { return Fingerprint{agreed_knob_values(config)}; }

std::string describe_ranks(const std::vector<int>& ranks) {
  std::string out = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    out += (i ? ", " : "") + std::to_string(ranks[i]);
    if (j > i) out += "-" + std::to_string(ranks[j]);
    i = j + 1;
  }
  return out;
}

Status init_verdict(const std::vector<Status>& statuses,
                    const std::vector<Fingerprint>& fingerprints) {
  if (Status failed = failed_ranks(statuses); !failed.ok()) return failed;
  std::string differences;
  for (const std::string& name : entry_names(fingerprints)) {
    std::vector<std::string> values;
    for (const Fingerprint& f : fingerprints) values.push_back(value_of(f, name));
    auto groups = group_ranks(values);
    if (groups.size() < 2) continue;
    differences += (differences.empty() ? "" : "; ") + name + " is " +
                   describe_values(groups);
  }
  if (differences.empty()) return Status::OK();
  return invalid_argument("the ranks' settings differ, and these must be equal on "
                          "every rank (they shape how kolo plans and moves the data): " +
                          differences);
}

Status agree_at_init(transport::ControlPlane& control, const Status& mine,
                     const Fingerprint& fingerprint) {
  // Only the message travels; where it arose stays in this rank's debug log.
  if (!mine.where().empty()) KOLO_LOG(kDebug) << "kolo_init on this rank: " << mine.debug_string();
  std::vector<transport::Bytes> reports;
  if (Status s = control.allgather(encode_init_report(mine, fingerprint.entries), &reports);
      !s.ok())
    return Status(s.code(), "kolo_init: the ranks could not compare their set-up: " + s.message());
  std::vector<Status> statuses(reports.size());
  std::vector<Fingerprint> fingerprints(reports.size());
  for (size_t r = 0; r < reports.size(); ++r) {
    if (Status s = decode_init_report(reports[r], &statuses[r], &fingerprints[r].entries);
        !s.ok()) {
      statuses[r] = invalid_argument("its report at init cannot be read here (" + s.message() +
                                     "); every rank must run the same kolo build");
    }
  }
  return init_verdict(statuses, fingerprints);
}

}  // namespace kolo::core
