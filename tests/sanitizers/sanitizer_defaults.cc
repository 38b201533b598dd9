// Sanitizer runtime defaults, linked into every test executable of a sanitized
// build (KOLO_SANITIZE, cmake/sanitizers.cmake), so that `ctest` and a test run by
// hand behave alike with no *SAN_OPTIONS in the environment. Options set in the
// environment still win over these.
//
// Note [Sanitizer suppressions]: only what is not kolo's is suppressed. MPICH,
// hwloc and their helpers are not instrumented: MPICH keeps allocations until
// exit (LeakSanitizer would report them), and its shared-memory progress engine
// synchronises through atomics TSan cannot see. kolo's own frames are never
// listed: a finding there is a bug to fix.

extern "C" {

#define KOLO_SANITIZER_HOOK __attribute__((visibility("default"), used))

KOLO_SANITIZER_HOOK const char* __asan_default_options() {
  return "strict_string_checks=1:check_initialization_order=1";
}

KOLO_SANITIZER_HOOK const char* __ubsan_default_options() {
  return "print_stacktrace=1:halt_on_error=1";
}

KOLO_SANITIZER_HOOK const char* __lsan_default_suppressions() {
  return "leak:libmpich\n"
         "leak:libmpi\n"
         "leak:libhwloc\n"
         "leak:libfabric\n"
         "leak:libucp\n"
         "leak:libucs\n"
         "leak:libpmix\n";
}

KOLO_SANITIZER_HOOK const char* __tsan_default_options() {
  return "halt_on_error=1:second_deadlock_stack=1";
}

KOLO_SANITIZER_HOOK const char* __tsan_default_suppressions() {
  return "called_from_lib:libmpich\n"
         "called_from_lib:libhwloc\n";
}

}  // extern "C"
