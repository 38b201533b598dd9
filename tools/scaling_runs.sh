#!/usr/bin/env bash
# The measurements behind docs/scaling.md: kolo-allreduce-perf on every configuration
# the pretend cluster runs here, REPEAT times each:
#   1 host x 2 ranks, -t shm                 the shm class
#   1 host x 4 and x 3 ranks (-t shm, ring; -r mpi)   the oversubscribed classes:
#                                            more ranks than this machine's cores
#   2 hosts x 1 and x 2 ranks, -t ring and hierarchical, -r mpi, over links shaped
#                                            to each RATE (2 x 1 ring: net and mpi)
#   3 hosts x 1 rank, -t ring, -r mpi        a configuration outside the issue's list
# (the tool's isolated hosts make every byte of MPI's data between hosts cross the
# links). Writes one table per run into OUT_DIR, named
# <rate>_<hosts>x<ppn>_<transport>_<repeat>.txt (rate "shm" for one host), for
# tools/scaling_model.py, and the load average before and after each run (uptime)
# into OUT_DIR/load.txt.
#   tools/scaling_runs.sh OUT_DIR [REPEAT] [RATE...]     (default: 2, 1gbit 250mbit)
# SCALING_RUN_WRAPPER, if set, is put before each run (e.g. a script that holds
# other work off the machine while it measures).
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
  ${SCALING_RUN_WRAPPER:-} tools/pretend_cluster.sh --timeout 300 "$@" >"$out/$name.txt" 2>"$out/$name.err" || status=$?
  echo "$name after:  $(uptime)" >>"$out/load.txt"
  [[ $status -eq 0 ]] || { echo "scaling_runs: $name exited $status" >&2; return 1; }
  grep -q "Avg bus bandwidth" "$out/$name.txt" || { echo "scaling_runs: $name printed no table" >&2; return 1; }
  echo "scaling_runs: $name"
}

for ((r = 1; r <= repeat; r++)); do
  run "shm_1x2_shm_$r" --hosts 1 -- -n 2 "$perf" -t shm "${sizes[@]}"
  for n in 4 3; do
    for t in shm ring; do
      run "shm_1x${n}_${t}_$r" --hosts 1 -- -n "$n" "$perf" -t "$t" -r mpi "${sizes[@]}"
    done
  done
  for rate in "${rates[@]}"; do
    for ppn in 1 2; do
      for t in ring hierarchical; do
        run "${rate}_2x${ppn}_${t}_$r" --hosts 2 --rate "$rate" -- \
          -ppn "$ppn" -n $((2 * ppn)) "$perf" -t "$t" -r mpi "${sizes[@]}"
      done
    done
    run "${rate}_3x1_ring_$r" --hosts 3 --rate "$rate" -- \
      -ppn 1 -n 3 "$perf" -t ring -r mpi "${sizes[@]}"
  done
done
