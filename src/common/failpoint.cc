#include "common/failpoint.h"

namespace kolo {
namespace detail {
std::atomic<FailpointAction> g_failpoint_action{nullptr};
}  // namespace detail

void set_failpoint_action(FailpointAction action) {
  detail::g_failpoint_action.store(action, std::memory_order_release);
}

}  // namespace kolo
