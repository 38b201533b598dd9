// The C API's process sets, run-time timeline and autotune queries
// (include/kolo/kolo.h) over the runtime of c_api.cc. Every entry point runs inside
// guarded() (firewall.h), as in c_api.cc.
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "bindings/c/c_api_state.h"
#include "bindings/c/firewall.h"
#include "common/status.h"
#include "core/process_sets.h"
#include "core/runtime.h"
#include "kolo/kolo.h"

namespace {

using kolo::Status;
using kolo::c_api::g_lifecycle_mu;
using kolo::c_api::g_runtime;
using kolo::c_api::guarded;
using kolo::c_api::invalid;
using kolo::c_api::not_initialized;
using kolo::c_api::report;

// A process set's query: fn(set, this rank's global rank), or -1 (with
// kolo_last_error) when not initialised or the id is unknown.
template <typename Fn>
int process_set_value(int32_t id, Fn fn) {
  return guarded(-1, [&] {
    if (!g_runtime) {
      not_initialized();
      return -1;
    }
    std::shared_ptr<const kolo::core::ProcessSet> set;
    if (Status s = g_runtime->process_sets()->find(id, &set); !s.ok()) {
      report(s);
      return -1;
    }
    return fn(*set, g_runtime->topology().rank);
  });
}

}  // namespace

extern "C" {

kolo_status_t kolo_autotune_state(int* frozen, int64_t* changes, uint64_t* digest) {
  return guarded([&] {
    std::lock_guard<std::mutex> lock(g_lifecycle_mu);
    if (!g_runtime) return not_initialized();
    const kolo::core::AutotuneRecord::State s = g_runtime->autotune_state();
    if (frozen != nullptr) *frozen = s.frozen ? 1 : 0;
    if (changes != nullptr) *changes = s.changes;
    if (digest != nullptr) *digest = s.digest;
    return report(Status::OK());
  });
}

kolo_status_t kolo_timeline_start(const char* path, int mark_cycles) {
  return guarded([&] {
    if (!g_runtime) return not_initialized();
    if (path == nullptr) return invalid("kolo_timeline_start: path is NULL");
    Status s = g_runtime->start_timeline(path, mark_cycles != 0);
    if (!s.ok()) return report(s.code(), "kolo_timeline_start: " + s.message());
    return report(Status::OK());
  });
}

kolo_status_t kolo_timeline_stop(void) {
  return guarded([&] {
    if (!g_runtime) return not_initialized();
    Status s = g_runtime->stop_timeline();
    if (!s.ok()) return report(s.code(), "kolo_timeline_stop: " + s.message());
    return report(Status::OK());
  });
}

kolo_status_t kolo_process_set_add(const int* ranks, int n, int32_t* id) {
  return guarded([&] {
    if (!g_runtime) return not_initialized();
    if (id == nullptr) return invalid("id is NULL (the int32_t* that receives the new set's id)");
    // Unusable arguments still take part in the exchange, so every rank fails alike.
    std::string local_error;
    std::vector<int> members;
    if (n < 0) {
      local_error = "n is negative (" + std::to_string(n) + "): the number of ranks";
    } else if (n > 0 && ranks == nullptr) {
      local_error = "ranks is NULL";
    } else {
      members.assign(ranks, ranks + n);
    }
    int32_t added = 0;
    if (Status s = g_runtime->process_sets()->add(std::move(members), local_error, &added); !s.ok())
      return report(s);
    *id = added;
    return report(Status::OK());
  });
}

kolo_status_t kolo_process_set_remove(int32_t id) {
  return guarded([&] {
    if (!g_runtime) return not_initialized();
    return report(g_runtime->process_sets()->remove(id));
  });
}

int kolo_process_set_rank(int32_t id) {
  return process_set_value(id, [](const kolo::core::ProcessSet& set, int rank) {
    return set.rank_of(rank);
  });
}

int kolo_process_set_size(int32_t id) {
  return process_set_value(id, [](const kolo::core::ProcessSet& set, int) {
    return static_cast<int>(set.ranks.size());
  });
}

int kolo_process_set_included(int32_t id) {
  return process_set_value(id, [](const kolo::core::ProcessSet& set, int rank) {
    return set.rank_of(rank) >= 0 ? 1 : 0;
  });
}

kolo_status_t kolo_process_set_ranks(int32_t id, int* ranks, int n, int* size) {
  return guarded([&] {
    if (!g_runtime) return not_initialized();
    if (n < 0) return invalid("n is negative (" + std::to_string(n) + "): the length of ranks");
    if (n > 0 && ranks == nullptr) return invalid("ranks is NULL");
    std::shared_ptr<const kolo::core::ProcessSet> set;
    if (Status s = g_runtime->process_sets()->find(id, &set); !s.ok()) return report(s);
    for (int i = 0; i < n && i < static_cast<int>(set->ranks.size()); ++i) ranks[i] = set->ranks[i];
    if (size != nullptr) *size = static_cast<int>(set->ranks.size());
    return report(Status::OK());
  });
}

}  // extern "C"
