#!/usr/bin/env bash
# Fuzzes the targets in tests/fuzz/ with libFuzzer (clang, AddressSanitizer + UBSan),
# in build-fuzz/. Each target starts from its committed corpus (tests/fuzz/corpus/
# <target>/, read only) and writes what it finds to build-fuzz/corpus/<target>/;
# a crash or broken invariant lands in build-fuzz/crashes/ and is printed.
#   tools/fuzz.sh [SECONDS] [TARGET...]   SECONDS per target (default 60), one after
#                                         another, at nice 19; targets: wire knobs
#                                         fusion_planner schedule frame (default: all)
#   tools/fuzz.sh --merge [TARGET...]     adds to the committed corpus the inputs of
#                                         build-fuzz/corpus/ that reach new coverage
# The committed corpus runs as plain tests under any compiler: ctest -L fuzz.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

merge=0
seconds=60
if [[ "${1:-}" == "--merge" ]]; then
  merge=1
  shift
elif [[ "${1:-}" =~ ^[0-9]+$ ]]; then
  seconds=$1
  shift
fi
targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=(wire knobs fusion_planner schedule frame)

tools/setup-deps.sh --fuzz
if [[ ! -f build-fuzz/build.ninja ]]; then
  CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DKOLO_FUZZ=ON -DKOLO_SANITIZE=address,undefined -DKOLO_BUILD_BENCH=OFF \
    -DKOLO_WITH_NCCL=OFF
fi
cmake --build build-fuzz --target kolo_fuzzers
mkdir -p build-fuzz/crashes

status=0
for t in "${targets[@]}"; do
  fuzzer=build-fuzz/bin/${t}_fuzzer
  mkdir -p "build-fuzz/corpus/$t"
  if [[ $merge -eq 1 ]]; then
    "$fuzzer" -merge=1 "tests/fuzz/corpus/$t" "build-fuzz/corpus/$t"
    continue
  fi
  echo "=== fuzz.sh: $t for $seconds s ==="
  if ! nice -n 19 "$fuzzer" -max_total_time="$seconds" -print_final_stats=1 \
       -artifact_prefix="build-fuzz/crashes/$t-" \
       "build-fuzz/corpus/$t" "tests/fuzz/corpus/$t"; then
    echo "fuzz.sh: $t found a crash or a broken invariant: build-fuzz/crashes/$t-*" >&2
    status=1
  fi
done
exit $status
