#!/usr/bin/env bash
# The measurements behind docs/scaling.md: kolo-allreduce-perf on every configuration
# the pretend cluster runs here (1 host x 2 ranks for the shm class; 2 hosts x 1 and
# x 2 ranks over links shaped to each RATE; the tool's isolated hosts make every
# byte of MPI's data cross them), REPEAT times each. Writes one table per run into
# OUT_DIR, named <rate>_<hosts>x<ppn>_<transport>_<repeat>.txt, for
# tools/scaling_model.py, and the load average before and after each run (uptime)
# into OUT_DIR/load.txt.
#   tools/scaling_runs.sh OUT_DIR [REPEAT] [RATE...]     (default: 2, 1gbit 250mbit)
# Needs root (tools/pretend_cluster.sh) and build/bin/kolo-allreduce-perf.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

out=${1:?usage: tools/scaling_runs.sh OUT_DIR [REPEAT] [RATE...]}
repeat=${2:-2}
shift 2 || shift $#
rates=("$@")
[[ ${#rates[@]} -gt 0 ]] || rates=(1gbit 250mbit)
mkdir -p "$out"
perf=$PWD/build/bin/kolo-allreduce-perf
sizes=(-b 8 -e 8M -f 4 -n 5 -w 2)

# run NAME CLUSTER-ARGS -- MPIEXEC-ARGS: one table, its load average beside it.
run() {
  local name=$1 status=0
  shift
  echo "$name before: $(uptime)" >>"$out/load.txt"
  tools/pretend_cluster.sh --timeout 300 "$@" >"$out/$name.txt" 2>"$out/$name.err" || status=$?
  echo "$name after:  $(uptime)" >>"$out/load.txt"
  [[ $status -eq 0 ]] || { echo "scaling_runs: $name exited $status" >&2; return 1; }
  grep -q "Avg bus bandwidth" "$out/$name.txt" || { echo "scaling_runs: $name printed no table" >&2; return 1; }
  echo "scaling_runs: $name"
}

for ((r = 1; r <= repeat; r++)); do
  run "shm_1x2_shm_$r" --hosts 1 -- -n 2 "$perf" -t shm "${sizes[@]}"
  for rate in "${rates[@]}"; do
    for ppn in 1 2; do
      for t in ring hierarchical; do
        run "${rate}_2x${ppn}_${t}_$r" --hosts 2 --rate "$rate" -- \
          -ppn "$ppn" -n $((2 * ppn)) "$perf" -t "$t" -r mpi "${sizes[@]}"
      done
    done
  done
done
