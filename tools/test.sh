#!/usr/bin/env bash
# Quick start, part 2: set up, build, and run the whole test suite, then the
# sanitizer jobs (tools/sanitize.sh: AddressSanitizer + UBSan, ThreadSanitizer).
# This is what CI runs.
#   tools/test.sh                  every job: main (build/), asan (build-asan/), tsan
#   KOLO_TEST_JOBS=main tools/test.sh    only the main suite (quick, for developers)
#   KOLO_TEST_JOBS="main tsan" ...       any subset, in that order
#   tools/test.sh -L unit          extra arguments go to the main suite's ctest, and
#                                  then only the main suite runs (unless KOLO_TEST_JOBS)
# Every job runs even when an earlier one fails; the exit code is 0 only if all pass.
# Multi-rank tests declare PROCESSORS 2, so -j2 never runs two of them at once.
# The main job includes the multihost tests (hosts of a pretend cluster of network
# namespaces, tools/pretend_cluster.sh; they skip without root and say why), the
# failure matrix across hosts among them (label multihost.failure, and its
# socket-world subset multihost.failure.socket);
# `KOLO_TEST_JOBS=multihost` runs them alone. The matrix's soaks (label
# multihost.long_failure: a slow link, oversubscribed cores) and the socket
# world's whole matrix (multihost.long_failure.socket) run only in
# `KOLO_TEST_JOBS=long` (minutes where the kernel has netem).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if [[ $# -gt 0 ]]; then
  jobs=${KOLO_TEST_JOBS:-main}
else
  jobs=${KOLO_TEST_JOBS:-main asan tsan}
fi

passed=()
failed=()
for job in $jobs; do
  echo "=== test.sh: job $job ==="
  start=$SECONDS
  case "$job" in
    main) cmd=(bash -c 'tools/build.sh && ctest --test-dir build --output-on-failure -j2 -LE long_failure "$@"' _ "$@") ;;
    multihost) cmd=(bash -c 'tools/build.sh && ctest --test-dir build --output-on-failure -j2 -L multihost -LE long_failure "$@"' _ "$@") ;;
    long) cmd=(bash -c 'tools/build.sh && ctest --test-dir build --output-on-failure -j2 -L long_failure "$@"' _ "$@") ;;
    asan|tsan) cmd=(tools/sanitize.sh "$job") ;;
    *) echo "test.sh: unknown job '$job' (main, multihost, long, asan, tsan)" >&2; exit 2 ;;
  esac
  if "${cmd[@]}"; then
    passed+=("$job")
  else
    failed+=("$job")
  fi
  echo "=== test.sh: job $job took $((SECONDS - start)) s ==="
done

echo "test.sh: jobs passed: ${passed[*]:-none}; failed: ${failed[*]:-none}"
[[ ${#failed[@]} -eq 0 ]]
