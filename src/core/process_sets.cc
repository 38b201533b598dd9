#include "core/process_sets.h"

#include <algorithm>
#include <climits>
#include <cstring>

#include "common/check.h"
#include "core/runtime.h"

namespace kolo::core {
namespace {

// What a rank contributes to add() when its own arguments were unusable.
constexpr int32_t kBadArguments = INT32_MIN;

std::string list(const std::vector<int32_t>& ranks) {
  std::string out = "[";
  for (size_t i = 0; i < ranks.size(); ++i) out += (i ? ", " : "") + std::to_string(ranks[i]);
  return out + "]";
}

// remove(): what a rank found locally, contributed as {id, state, in flight}.
enum RemoveState : int32_t { kRemovable = 0, kUnknown = 1, kBusy = 2 };

}  // namespace

int ProcessSet::rank_of(int global_rank) const {
  auto it = std::lower_bound(ranks.begin(), ranks.end(), global_rank);
  return it != ranks.end() && *it == global_rank ? static_cast<int>(it - ranks.begin()) : -1;
}

ProcessSets::ProcessSets(Runtime& global, transport::MakeSubset make, const Config& config,
                         int rank, int size)
    : global_(global), make_(std::move(make)), config_(config), rank_(rank), size_(size) {
  auto everyone = std::make_shared<ProcessSet>();
  for (int r = 0; r < size; ++r) everyone->ranks.push_back(r);
  sets_[0] = std::move(everyone);
}

ProcessSets::~ProcessSets() { shutdown(); }

Status ProcessSets::find(int32_t id, std::shared_ptr<const ProcessSet>* out) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sets_.find(id);
  if (it == sets_.end())
    return invalid_argument("unknown process set id " + std::to_string(id) +
                            (id > 0 && id < next_id_ ? " (it was removed)" : ""));
  *out = it->second;
  return Status::OK();
}

Status ProcessSets::exchange(const std::vector<int32_t>& mine,
                             std::vector<std::vector<int32_t>>* all) {
  CollectiveArgs args;
  args.collective = Collective::kAllgather;
  args.name = "kolo.process_sets." + std::to_string(exchanges_++);
  args.input = mine.data();
  args.rows = static_cast<int64_t>(mine.size());
  args.dtype = DataType::kInt32;
  std::shared_ptr<HandleState> handle;
  KOLO_RETURN_IF_ERROR_AS_IS(global_.submit(std::move(args), &handle));
  handle->wait(-1.0);
  if (handle->code() != Code::kOk) return Status(handle->code(), handle->message());
  const int32_t* data = reinterpret_cast<const int32_t*>(handle->output.data());
  all->clear();
  for (int64_t rows : handle->splits) {
    all->emplace_back(data, data + rows);
    data += rows;
  }
  return Status::OK();
}

Status ProcessSets::check_add(const std::vector<std::vector<int32_t>>& all,
                              std::vector<int>* ranks) const {
  const std::string what = "kolo_process_set_add: ";
  for (size_t r = 0; r < all.size(); ++r) {
    if (!all[r].empty() && all[r][0] == kBadArguments)
      return invalid_argument(what + "rank " + std::to_string(r) +
                              " passed unusable arguments (its own error says which)");
  }
  for (size_t r = 1; r < all.size(); ++r) {
    if (all[r] != all[0])
      return invalid_argument(what + "ranks list different members: rank 0 passes " +
                              list(all[0]) + ", rank " + std::to_string(r) + " passes " +
                              list(all[r]));
  }
  if (all[0].empty()) return invalid_argument(what + "a process set needs at least one rank");
  std::vector<int32_t> sorted = all[0];
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i) {
    if (sorted[i] < 0 || sorted[i] >= size_)
      return invalid_argument(what + "rank " + std::to_string(sorted[i]) + " in " +
                              list(all[0]) + " is not a rank of this job (0.." +
                              std::to_string(size_ - 1) + ")");
    if (i > 0 && sorted[i] == sorted[i - 1])
      return invalid_argument(what + list(all[0]) + " names rank " + std::to_string(sorted[i]) +
                              " twice");
  }
  ranks->assign(sorted.begin(), sorted.end());
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [id, set] : sets_) {
    if (set->ranks == *ranks)
      return invalid_argument(what + "process set " + std::to_string(id) +
                              " already has the ranks " + list(sorted));
  }
  return Status::OK();
}

Status ProcessSets::start_member(int32_t id, const std::vector<int>& ranks,
                                 std::shared_ptr<Runtime>* out) {
  if (!make_) return unsupported("this kolo cannot make process sets");
  transport::World world;
  KOLO_RETURN_IF_ERROR_AS_IS(make_(id, ranks, &world));
  // A set's runtime writes no timeline and no flight recorder of its own: both
  // are files named by rank, which the global set's already are.
  Config config = config_;
  config.timeline_path.clear();
  config.flight_recorder = 0;
  std::unique_ptr<Runtime> runtime;
  KOLO_RETURN_IF_ERROR_AS_IS(Runtime::start_set(std::move(world), config, id, &runtime));
  *out = std::move(runtime);
  return Status::OK();
}

Status ProcessSets::add(std::vector<int> ranks, const std::string& local_error, int32_t* id) {
  std::lock_guard<std::mutex> change(change_mu_);
  std::vector<int32_t> mine(ranks.begin(), ranks.end());
  if (!local_error.empty()) mine = {kBadArguments};
  std::vector<std::vector<int32_t>> all;
  KOLO_RETURN_IF_ERROR_AS_IS(exchange(mine, &all));
  Status verdict = check_add(all, &ranks);
  if (!local_error.empty()) return invalid_argument("kolo_process_set_add: " + local_error);
  KOLO_RETURN_IF_ERROR_AS_IS(verdict);
  auto set = std::make_shared<ProcessSet>();
  set->ranks = std::move(ranks);
  {
    std::lock_guard<std::mutex> lock(mu_);
    set->id = next_id_++;
  }
  if (set->rank_of(rank_) >= 0)
    KOLO_RETURN_IF_ERROR_AS_IS(start_member(set->id, set->ranks, &set->runtime));
  std::lock_guard<std::mutex> lock(mu_);
  sets_[set->id] = set;
  *id = set->id;
  return Status::OK();
}

Status ProcessSets::check_remove(int32_t id, const std::vector<std::vector<int32_t>>& all) const {
  const std::string what = "kolo_process_set_remove: ";
  std::string busy;
  for (size_t r = 0; r < all.size(); ++r) {
    if (all[r][0] != id)
      return invalid_argument(what + "ranks remove different sets: rank 0 removes " +
                              std::to_string(all[0][0]) + ", rank " + std::to_string(r) +
                              " removes " + std::to_string(all[r][0]));
    if (all[r][1] == kBusy)
      busy += (busy.empty() ? "" : ", ") + std::string("rank ") + std::to_string(r) + " (" +
              std::to_string(all[r][2]) + ")";
  }
  if (id == 0) return invalid_argument(what + "the global process set (id 0) cannot be removed");
  if (all[rank_][1] == kUnknown) {
    std::shared_ptr<const ProcessSet> set;
    return invalid_argument(what + find(id, &set).message());
  }
  if (!busy.empty())
    return invalid_argument(what + "process set " + std::to_string(id) +
                            " has operations in flight on " + busy +
                            "; wait for them before removing it");
  return Status::OK();
}

Status ProcessSets::remove(int32_t id) {
  std::lock_guard<std::mutex> change(change_mu_);
  std::shared_ptr<const ProcessSet> set;
  int32_t state = kRemovable;
  int32_t in_flight = 0;
  if (id == 0 || !find(id, &set).ok()) {
    state = kUnknown;
  } else if (set->runtime && set->runtime->in_flight() > 0) {
    state = kBusy;
    in_flight = static_cast<int32_t>(set->runtime->in_flight());
  }
  std::vector<std::vector<int32_t>> all;
  KOLO_RETURN_IF_ERROR_AS_IS(exchange({id, state, in_flight}, &all));
  KOLO_RETURN_IF_ERROR_AS_IS(check_remove(id, all));
  {
    std::lock_guard<std::mutex> lock(mu_);
    sets_.erase(id);
  }
  // The members' runtimes stop at the same cycle of the set's negotiation.
  if (set->runtime) set->runtime->shutdown();
  return Status::OK();
}

void ProcessSets::shutdown() {
  std::map<int32_t, std::shared_ptr<const ProcessSet>> sets;
  {
    std::lock_guard<std::mutex> lock(mu_);
    sets = sets_;
  }
  for (auto& [id, set] : sets)
    if (set->runtime) set->runtime->shutdown();
}

}  // namespace kolo::core
