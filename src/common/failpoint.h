// Failpoints: named places inside kolo where a test may end this process, so
// that a rank can be killed at a chosen phase (init, negotiate, shm, ring, mpi,
// teardown). Production code only marks the places; nothing in production arms
// them and no knob does: a test program arms them through the test-only entry
// point kolo_testing_set_failpoint_action (bindings/c/testing.h). Unarmed, a
// failpoint costs one relaxed load.
#pragma once

#include <atomic>

namespace kolo {

// What an armed failpoint does; called with the point's name on the thread
// that passes it. It decides itself whether this pass is the one to act on.
using FailpointAction = void (*)(const char* point);

namespace detail {
extern std::atomic<FailpointAction> g_failpoint_action;
}  // namespace detail

// Arms every failpoint with `action` (null disarms). Tests only.
void set_failpoint_action(FailpointAction action);

// Marks a place a test may stop the process at. Any thread.
inline void failpoint(const char* point) {
  if (FailpointAction action = detail::g_failpoint_action.load(std::memory_order_relaxed))
    action(point);
}

}  // namespace kolo
