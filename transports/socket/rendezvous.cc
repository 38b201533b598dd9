#include "transports/socket/rendezvous.h"

#include <algorithm>
#include <charconv>
#include <sstream>

#include "common/check.h"
#include "transports/socket/net.h"

namespace kolo::socket {
namespace {

std::string record_key(const std::string& scope, int rank) {
  return scope + "rank/" + std::to_string(rank);
}

std::string generation_key(int rank) { return "kolo/generation/rank/" + std::to_string(rank); }

template <typename T>
bool parse_number(const std::string& text, T* out) {
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && end == text.data() + text.size();
}

}  // namespace

std::string encode_record(const RankRecord& r) {
  if (!r.error.empty()) return "error=" + r.error + "\n";
  return "size=" + std::to_string(r.size) + "\npid=" + std::to_string(r.pid) + "\nhost=" + r.host +
         "\naddress=" + r.address + "\nport=" + std::to_string(r.port) + "\nnode=" + r.node + "\n";
}

Status decode_record(const std::string& text, RankRecord* out) {
  RankRecord r;
  if (text.rfind("error=", 0) == 0) {
    r.error = text.substr(6);
    if (!r.error.empty() && r.error.back() == '\n') r.error.pop_back();
    *out = r;
    return Status::OK();
  }
  std::istringstream lines(text);
  std::string line;
  int fields = 0;
  while (std::getline(lines, line)) {
    const size_t eq = line.find('=');
    if (eq == std::string::npos) return invalid_argument("a rank record line without '=': " + line);
    const std::string name = line.substr(0, eq);
    const std::string value = line.substr(eq + 1);
    bool ok = true;
    if (name == "size") ok = parse_number(value, &r.size);
    else if (name == "pid") ok = parse_number(value, &r.pid);
    else if (name == "host") r.host = value;
    else if (name == "address") r.address = value;
    else if (name == "port") ok = parse_number(value, &r.port);
    else if (name == "node") r.node = value;
    else continue;  // a newer kolo's field
    if (!ok) return invalid_argument("a rank record's " + name + " is '" + value + "'");
    ++fields;
  }
  if (r.node.empty()) r.node = "host:" + r.host;
  if (fields < 5) return invalid_argument("a rank record without all its fields: " + text);
  *out = r;
  return Status::OK();
}

// Reads the records of the ranks in *missing that have arrived (into `all`),
// checking each; *missing keeps the others.
static Status read_arrived(Store& base, const std::string& scope, int rank, int size,
                           std::vector<int>* missing, std::vector<RankRecord>* all) {
  std::vector<int> still;
  for (int r : *missing) {
    std::string text;
    bool found = false;
    KOLO_RETURN_IF_ERROR_AS_IS(base.try_get(record_key(scope, r), &text, &found));
    if (!found) {
      still.push_back(r);
      continue;
    }
    RankRecord& rec = (*all)[r];
    if (Status s = decode_record(text, &rec); !s.ok())
      return Status(s.code(), "rank " + std::to_string(r) + ": " + s.message());
    if (!rec.error.empty())
      return Status(Code::kTransport, "rank " + std::to_string(r) + " failed kolo_init: " + rec.error);
    if (rec.size != size)
      return invalid_argument("rank " + std::to_string(r) + " (pid " + std::to_string(rec.pid) +
                              " on " + rec.host + ") has world size " + std::to_string(rec.size) +
                              ", rank " + std::to_string(rank) + " has " + std::to_string(size) +
                              " (WORLD_SIZE differs between the ranks)");
  }
  *missing = std::move(still);
  return Status::OK();
}

// Where the missing ranks last were: a newer generation fails this (stale) rank;
// an older one goes into *elsewhere for the timeout's message.
static Status look_elsewhere(Store& base, const std::vector<int>& missing, int rank,
                             uint64_t generation, std::string* elsewhere) {
  elsewhere->clear();
  for (int r : missing) {
    std::string text;
    bool found = false;
    uint64_t theirs = 0;
    KOLO_RETURN_IF_ERROR_AS_IS(base.try_get(generation_key(r), &text, &found));
    if (!found || !parse_number(text, &theirs) || theirs == generation) continue;
    if (theirs > generation)
      return Status(Code::kTransport,
                    "rank " + std::to_string(r) + " is at generation " + std::to_string(theirs) +
                        ", rank " + std::to_string(rank) + " at " + std::to_string(generation) +
                        ": the job has re-formed without this rank (it is stale)");
    *elsewhere += "; rank " + std::to_string(r) + " last joined generation " + std::to_string(theirs);
  }
  return Status::OK();
}

Status exchange_records(Store& base, const std::string& scope, int rank, int size,
                        uint64_t generation, const RankRecord& mine,
                        std::chrono::steady_clock::time_point deadline,
                        std::vector<RankRecord>* all) {
  KOLO_RETURN_IF_ERROR_AS_IS(base.set(generation_key(rank), std::to_string(generation)));
  KOLO_RETURN_IF_ERROR_AS_IS(base.set(record_key(scope, rank), encode_record(mine)));
  if (!mine.error.empty()) return Status::OK();
  all->assign(static_cast<size_t>(size), RankRecord{});
  (*all)[rank] = mine;
  std::vector<int> missing;
  for (int r = 0; r < size; ++r)
    if (r != rank) missing.push_back(r);
  const auto start = Clock::now();
  auto slice = std::chrono::milliseconds(50);
  while (true) {
    KOLO_RETURN_IF_ERROR_AS_IS(read_arrived(base, scope, rank, size, &missing, all));
    if (missing.empty()) return Status::OK();
    std::string elsewhere;
    KOLO_RETURN_IF_ERROR_AS_IS(look_elsewhere(base, missing, rank, generation, &elsewhere));
    const auto now = Clock::now();
    if (now >= deadline) {
      std::string ranks;
      for (size_t i = 0; i < missing.size() && i < 16; ++i)
        ranks += (i ? ", " : "") + std::to_string(missing[i]);
      if (missing.size() > 16) ranks += " and " + std::to_string(missing.size() - 16) + " more";
      return Status(Code::kTimeout, "rank " + std::to_string(rank) + " waited " +
                                        seconds_text(now - start) + " at " + base.describe() +
                                        " for ranks " + ranks + " of generation " +
                                        std::to_string(generation) + " to arrive" + elsewhere);
    }
    std::vector<std::string> keys;
    for (int r : missing) keys.push_back(record_key(scope, r));
    Status s = base.wait(keys, std::min<Clock::duration>(slice, deadline - now));
    if (!s.ok() && s.code() != Code::kTimeout) return s;
    slice = std::min(slice * 2, std::chrono::milliseconds(1000));
  }
}

}  // namespace kolo::socket
