#!/usr/bin/env bash
# run.sh of a kit made by tools/gpu_kit.sh (copied there as KIT/run.sh).
#
#   bash KIT/run.sh ['COMMAND' ...]
#
# On the machine with GPUs, from anywhere (the kit finds itself):
#   1. unpacks gzipped libraries (into a temporary folder), puts them and KIT/lib
#      first on LD_LIBRARY_PATH (then the caller's, then /usr/local/cuda/lib64) and KIT/bin first on PATH, so that
#      `mpiexec` is this kit's MPICH hydra (an Open MPI on the machine is not used);
#   2. reports any library a binary still cannot find, and `nvidia-smi -L`;
#   3. runs every device test: MPI tests under `mpiexec -n 1`, and `-n 2` as well
#      when two or more GPUs are visible; plain GoogleTest programs directly;
#   4. runs each COMMAND (a shell line, e.g. 'mpiexec -n 1 kolo-allreduce-perf -d
#      cuda') with the same environment;
#   5. prints one line per test run (passed/failed/skipped from GoogleTest) and
#      exits non-zero if a test or a command failed.
# Full logs are joined into one file, $OUT/kolo-kit.log when OUT is set (a folder
# that comes back from the GPU machine), else /tmp/kolo-kit.log; stdout gets the
# summaries and, for a failed run, the end of its log.
set -u

kit=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
joined_log=${OUT:-/tmp}/kolo-kit.log
per_test_timeout=${KOLO_KIT_TEST_TIMEOUT:-300}

# --- unpack and environment -------------------------------------------------------
# Gzipped libraries are unpacked outside the kit, so the kit stays small; the folder
# goes when this script ends.
unpacked=$(mktemp -d "${TMPDIR:-/tmp}/kolo-kit.XXXXXX") || exit 1
trap 'rm -rf "$unpacked"' EXIT
logs=$unpacked/logs
mkdir -p "$logs"
for gz in "$kit"/lib/*.gz; do
  [[ -e $gz ]] || continue
  gzip -dc "$gz" >"$unpacked/$(basename "$gz" .gz)" || { echo "run.sh: cannot unpack $gz" >&2; exit 1; }
done
chmod u+x "$kit"/bin/* 2>/dev/null

export LD_LIBRARY_PATH="$unpacked:$kit/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
[[ -d /usr/local/cuda/lib64 ]] && LD_LIBRARY_PATH="$LD_LIBRARY_PATH:/usr/local/cuda/lib64"
export PATH="$kit/bin:$PATH"

echo "== kit: $(sed -n 2p "$kit/MANIFEST" 2>/dev/null)"
echo "== LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
for b in "$kit"/bin/*; do
  [[ $(head -c 4 "$b") != $'\x7fELF' ]] && continue
  nf=$(ldd "$b" 2>&1 | grep 'not found')
  [[ -n $nf ]] && echo "run.sh: WARNING: $(basename "$b"): $nf"
done
echo "== libkolo uses: $(ldd "$kit/lib/libkolo.so.0" 2>/dev/null | awk '/libmpich|libnccl|libcudart/ {printf "%s ", $3}')"
echo "== nvidia-smi -L"
nvidia-smi -L 2>&1
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
gpus=${KOLO_KIT_GPUS:-$gpus}  # to force (or skip) the two-rank runs
echo "== $gpus GPU(s)"

# --- tests ----------------------------------------------------------------------
summaries=()
failures=0

# count LOG MARK: the number in GoogleTest's "[  MARK ] N test(s)" summary line.
count() {
  sed -n "s/^\[  $2 *\] \([0-9][0-9]*\) tests\{0,1\}[.,].*/\1/p" "$1" | tail -n 1
}

# run_test LABEL LOG COMMAND...: runs, logs, records a summary line.
run_test() {
  local label=$1 log=$2
  shift 2
  echo "== $label"
  timeout "$per_test_timeout" "$@" >"$log" 2>&1 </dev/null  # mpiexec would read stdin
  local rc=$?
  local passed failed skipped
  passed=$(count "$log" "PASSED")
  failed=$(count "$log" "FAILED")
  skipped=$(count "$log" "SKIPPED")
  local line
  line=$(printf '%-34s passed %3s  failed %3s  skipped %3s  rc %s' "$label" "${passed:-?}" \
         "${failed:-0}" "${skipped:-0}" "$rc")
  (( rc == 124 )) && line+="  (timed out after ${per_test_timeout}s)"
  [[ -z $passed ]] && line+="  (no GoogleTest summary: crashed?)"
  echo "$line"
  grep -h '^kolo-gpu-tests: all tests skipped' "$log"
  if (( rc != 0 )) || [[ -z $passed ]]; then
    failures=$((failures + 1))
    echo "---- last lines of $(basename "$log")"
    grep -v '^\[       OK \]\|^\[ RUN      \]' "$log" | tail -n 60
    echo "----"
  fi
  summaries+=("$line")
}

while read -r kind name <&3; do
  exe=$kit/bin/$name
  if [[ $kind == mpi ]]; then
    run_test "$name -n 1" "$logs/$name.np1.log" mpiexec -n 1 "$exe"
    if (( gpus >= 2 )); then
      run_test "$name -n 2" "$logs/$name.np2.log" mpiexec -n 2 "$exe"
    fi
  else
    run_test "$name" "$logs/$name.log" "$exe"
  fi
done 3<"$kit/tests.txt"

# --- commands -------------------------------------------------------------------
n=0
for cmd in "$@"; do
  n=$((n + 1))
  echo "== command $n: $cmd"
  { echo "\$ $cmd"; bash -c "$cmd" 2>&1 </dev/null; } | tee "$logs/command$n.log"
  rc=${PIPESTATUS[0]}
  summaries+=("$(printf '%-34s rc %s' "command $n" "$rc")")
  (( rc != 0 )) && failures=$((failures + 1))
done

{
  printf '%s\n' "${summaries[@]}"
  for log in "$logs"/*.log; do
    [[ -e $log ]] && printf '\n======== %s\n' "$(basename "$log")" && cat "$log"
  done
} >"$joined_log"
echo "== summary (all logs: $joined_log)"
printf '%s\n' "${summaries[@]}"
if (( failures > 0 )); then
  echo "== $failures run(s) failed"
  exit 1
fi
echo "== all runs passed (or skipped)"
