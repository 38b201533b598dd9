# KOLO_SANITIZE: build everything with sanitizers, for the sanitizer jobs that
# tools/test.sh runs after the main suite (build-asan/, build-tsan/).
#   address,undefined   AddressSanitizer + UndefinedBehaviorSanitizer
#   thread              ThreadSanitizer
#   (empty)             none, the default
# Any comma-separated list that -fsanitize= takes is passed through; "thread" may
# not be combined with "address". UBSan findings abort (-fno-sanitize-recover), so
# a finding fails its test instead of scrolling past. Sanitized builds compile at
# -O1 -g1 whatever the build type: fast enough to run the suites, and stack traces
# with file and line. The runtime defaults (MPICH's own leaks, TSan's MPI
# suppressions) are compiled into each test executable: tests/sanitizers/.
set(KOLO_SANITIZE "" CACHE STRING "Sanitizers: address,undefined | thread | empty for none")
# KOLO_FUZZ: also build the libFuzzer targets (tests/fuzz/); needs clang. Every
# object gets coverage instrumentation, so only tools/fuzz.sh's build-fuzz/ sets it.
option(KOLO_FUZZ "Build the libFuzzer targets (clang only)" OFF)
if(KOLO_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "KOLO_FUZZ needs clang (CXX=clang++), not ${CMAKE_CXX_COMPILER_ID}")
  endif()
  add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:-fsanitize=fuzzer-no-link>")
endif()

if(KOLO_SANITIZE)
  string(REPLACE "," ";" _kolo_sanitizers "${KOLO_SANITIZE}")
  if("thread" IN_LIST _kolo_sanitizers AND "address" IN_LIST _kolo_sanitizers)
    message(FATAL_ERROR "KOLO_SANITIZE: thread and address cannot be combined")
  endif()
  set(_kolo_sanitize_flags -fsanitize=${KOLO_SANITIZE} -fno-omit-frame-pointer -O1 -g1)
  if("undefined" IN_LIST _kolo_sanitizers)
    list(APPEND _kolo_sanitize_flags -fno-sanitize-recover=all)
  endif()
  add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:${_kolo_sanitize_flags}>")
  add_link_options(-fsanitize=${KOLO_SANITIZE})
  message(STATUS "kolo: sanitizers ${KOLO_SANITIZE}")
endif()
