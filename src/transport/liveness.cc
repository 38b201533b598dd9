#include "transport/liveness.h"

#include <atomic>

namespace kolo::transport {

namespace {
std::atomic<bool> g_peer_failed{false};
}  // namespace

void record_peer_failure() { g_peer_failed.store(true, std::memory_order_release); }
bool peer_failed_in_this_process() { return g_peer_failed.load(std::memory_order_acquire); }

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
