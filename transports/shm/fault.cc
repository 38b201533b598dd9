#include "transports/shm/fault.h"

namespace kolo::shm {

namespace internal {
std::atomic<FaultHook> g_fault_hook{nullptr};
}  // namespace internal

void set_fault_hook(FaultHook hook) { internal::g_fault_hook.store(hook, std::memory_order_release); }

}  // namespace kolo::shm
