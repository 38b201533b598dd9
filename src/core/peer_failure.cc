#include "core/peer_failure.h"

#include <mutex>
#include <vector>

#include "common/logging.h"

namespace kolo::core {
namespace {

std::mutex& hooks_mu() {
  static std::mutex mu;
  return mu;
}

std::vector<PeerFailureHook>& hooks() {
  static std::vector<PeerFailureHook> registered;
  return registered;
}

}  // namespace

void add_peer_failure_hook(PeerFailureHook hook) {
  std::lock_guard<std::mutex> lock(hooks_mu());
  hooks().push_back(std::move(hook));
}

void peer_failed(const Status& failure) {
  KOLO_LOG(kError) << failure.message() << "; every pending and later operation fails with "
                   << code_name(failure.code());
  std::vector<PeerFailureHook> copy;
  {
    std::lock_guard<std::mutex> lock(hooks_mu());
    copy = hooks();
  }
  for (const PeerFailureHook& hook : copy) hook(failure);
}

}  // namespace kolo::core
