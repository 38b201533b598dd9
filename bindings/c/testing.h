/* Test-only entry points of libkolo. Not part of kolo's API: not under
 * include/kolo, not installed, and no knob reaches them. They are exported
 * (kolo_testing_*) so that test programs can arm what production never does. */
#ifndef KOLO_BINDINGS_C_TESTING_H_
#define KOLO_BINDINGS_C_TESTING_H_

#ifdef __cplusplus
extern "C" {
#endif

/* Calls `action` with the point's name each time a thread passes a failpoint
 * inside kolo (src/common/failpoint.h names them); NULL disarms. The action
 * decides whether to act (e.g. raise SIGKILL on the n-th pass). Set it before
 * kolo_init. */
__attribute__((visibility("default"))) void kolo_testing_set_failpoint_action(
    void (*action)(const char* point));

#ifdef __cplusplus
}
#endif

#endif
