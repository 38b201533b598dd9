#include "bindings/c/testing.h"

#include "common/failpoint.h"

extern "C" void kolo_testing_set_failpoint_action(void (*action)(const char* point)) {
  kolo::set_failpoint_action(action);
}
