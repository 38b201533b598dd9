#!/usr/bin/env bash
# The measurements behind docs/scaling.md: kolo-allreduce-perf on every configuration
# the pretend cluster runs here (1 host x 2 ranks for the shm class; 2 hosts x 1 and
# x 2 ranks over links shaped to each RATE, with --isolate so that MPI's data
# crosses them), REPEAT times each. Writes one table per run into OUT_DIR, named
# <rate>_<hosts>x<ppn>_<transport>_<repeat>.txt, for tools/scaling_model.py.
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
sizes=(-b 8 -e 4M -f 8 -n 5 -w 2)

# run NAME CLUSTER-ARGS -- MPIEXEC-ARGS: one table. MPI_Finalize may hang with
# --isolate (Note [What makes a pretend host a host]); the table is printed before
# it, so a run that printed its summary line counts.
run() {
  local name=$1
  shift
  tools/pretend_cluster.sh --timeout 120 "$@" >"$out/$name.txt" 2>"$out/$name.err" || true
  grep -q "Avg bus bandwidth" "$out/$name.txt" || { echo "scaling_runs: $name printed no table" >&2; return 1; }
  echo "scaling_runs: $name"
}

for ((r = 1; r <= repeat; r++)); do
  run "shm_1x2_shm_$r" --hosts 1 --isolate -- -n 2 "$perf" -t shm "${sizes[@]}"
  for rate in "${rates[@]}"; do
    for ppn in 1 2; do
      for t in ring hierarchical; do
        run "${rate}_2x${ppn}_${t}_$r" --hosts 2 --isolate --rate "$rate" -- \
          -ppn "$ppn" -n $((2 * ppn)) "$perf" -t "$t" -r mpi "${sizes[@]}"
      done
    done
  done
done
