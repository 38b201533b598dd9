// Failure injection into the shm engines, for tests only: the places where a
// failure test kills a rank so that its peers are caught waiting inside the
// engine. fault_point() costs one relaxed load and does nothing unless a test
// has installed a hook with set_fault_hook(); no kolo code installs one, and
// the hook is reachable only by programs that link kolo's internal libraries
// (tests/failure/failure_probe does), not through libkolo's API or a knob.
#pragma once

#include <atomic>

namespace kolo::shm {

enum class FaultPoint {
  kAllreducePosted,  // the shm allreduce, after a rank posted a slice
};

using FaultHook = void (*)(FaultPoint point);

// Installs `hook` (null: none) for every engine of this process. Tests only;
// before the engines run.
void set_fault_hook(FaultHook hook);

namespace internal {
extern std::atomic<FaultHook> g_fault_hook;
}  // namespace internal

inline void fault_point(FaultPoint point) {
  if (FaultHook hook = internal::g_fault_hook.load(std::memory_order_relaxed)) hook(point);
}

}  // namespace kolo::shm
