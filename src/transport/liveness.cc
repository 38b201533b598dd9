#include "transport/liveness.h"

#include <atomic>
#include <cstdio>
#include <cstring>

namespace kolo::transport {

namespace {
std::atomic<bool> g_peer_failed{false};
}  // namespace

void record_peer_failure() { g_peer_failed.store(true, std::memory_order_release); }
bool peer_failed_in_this_process() { return g_peer_failed.load(std::memory_order_acquire); }

bool held_by_debugger(int pid) {
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%d/stat", pid);
  FILE* f = std::fopen(path, "r");
  if (!f) return false;
  char text[512];
  const size_t n = std::fread(text, 1, sizeof(text) - 1, f);
  std::fclose(f);
  text[n] = '\0';
  const char* close = std::strrchr(text, ')');  // the command name may hold anything
  return close && close[1] == ' ' && close[2] == 't';
}

Deadline::Deadline(std::chrono::steady_clock::duration limit, std::string what)
    : deadline_(std::chrono::steady_clock::now() + limit), limit_(limit), what_(std::move(what)) {}

Status Deadline::check() {
  if (status_.ok() && std::chrono::steady_clock::now() > deadline_) {
    const double seconds = std::chrono::duration<double>(limit_).count();
    status_ = Status(Code::kRankFailed, what_ + ": not every rank arrived within " +
                                            std::to_string(seconds) + " s (a rank died or hangs)");
    record_peer_failure();
  }
  return status_;
}

}  // namespace kolo::transport
