#!/usr/bin/env bash
# The runs behind docs/scaling.md's "MPI's composition, phase by phase" (issue #16):
# build/bin/kolo-mpi-phases (bench/mpi_phases.cc) on the pretend cluster.
#   docs/scaling/runs/explore/phases/run.sh CONFIG [RATE] [TAG]
# CONFIG: 2x2 (2 hosts x 2 ranks, MPICH's nodes), 2x1 (2 hosts x 1 rank), 2x1spin
# (2 x 1 beside a second job whose ranks 1 and 2, one on each host, busy-poll in
# MPI_Bcast, so 4 busy processes share the cores as on 2 x 2), 1x4pairs (1 host x 4
# ranks as two nodes of 2, --node-size 2: both pairs at once), 1x2 (1 host x 2 ranks,
# one node), 2x1loops (2 x 1 beside two `sh -c 'while :; do :; done'` loops, both in
# this script's session), 2x1setsid (the same loops, each in a session of its own).
# Writes <RATE>_<CONFIG>[_TAG].txt beside this script and appends the load
# average (uptime) before and after to load.txt. Run it under /work/notes/quiet.sh.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$here/../../../../.."
config=${1:?usage: run.sh CONFIG [RATE] [TAG]}
rate=${2:-1gbit}
tag=${3:+_$3}
bin=$PWD/build/bin/kolo-mpi-phases
args=(-b 8 -e 8M -f 4 -n 9 -w 2)
name=$rate
[[ $config == 1x* ]] && name=shm
out=$here/${name}_$config$tag.txt
cluster=(tools/pretend_cluster.sh --timeout 220)
echo "${name}_$config$tag before: $(uptime)" >>"$here/load.txt"
case $config in
  2x2) "${cluster[@]}" --hosts 2 --rate "$rate" -- -ppn 2 -n 4 "$bin" "${args[@]}" >"$out" ;;
  2x1) "${cluster[@]}" --hosts 2 --rate "$rate" -- -ppn 1 -n 2 "$bin" "${args[@]}" >"$out" ;;
  1x4pairs) "${cluster[@]}" --hosts 1 -- -n 4 "$bin" --node-size 2 "${args[@]}" >"$out" ;;
  1x2) "${cluster[@]}" --hosts 1 -- -n 2 "$bin" "${args[@]}" >"$out" ;;
  2x1spin)
    # The neighbours' job starts first and says when every rank of it is in MPI
    # (FILE.ready); the measured job runs; then FILE lets the neighbours go.
    "${cluster[@]}" --hosts 2 --rate "$rate" --command -- sh -c '
      f=$(mktemp -u /tmp/kolo-spin.XXXXXX)
      m="mpiexec.mpich -launcher ssh -launcher-exec $KOLO_CLUSTER_ENTER -localhost $KOLO_CLUSTER_LOCALHOST"
      $m -hosts h1:2,h2:1 -n 3 "$1" --spin "$f" &
      spinners=$!
      while [ ! -e "$f.ready" ]; do sleep 0.1; done
      shift
      $m -hosts h1,h2 -ppn 1 -n 2 "$@"
      status=$?
      touch "$f"
      wait $spinners
      rm -f "$f" "$f.ready"
      exit $status' sh "$bin" "$bin" "${args[@]}" >"$out" ;;
  2x1loops)
    # 2 x 1 beside two plain busy loops (no MPI, no system calls), for comparison.
    sh -c 'while :; do :; done' & l1=$!
    sh -c 'while :; do :; done' & l2=$!
    "${cluster[@]}" --hosts 2 --rate "$rate" -- -ppn 1 -n 2 "$bin" "${args[@]}" >"$out" || true
    kill "$l1" "$l2" ;;
  2x1setsid)
    # The same two loops, each in a session (and so a scheduler autogroup) of its
    # own, as every MPI rank is (Hydra starts each rank with setsid).
    setsid sh -c 'while :; do :; done' & l1=$!
    setsid sh -c 'while :; do :; done' & l2=$!
    "${cluster[@]}" --hosts 2 --rate "$rate" -- -ppn 1 -n 2 "$bin" "${args[@]}" >"$out" || true
    kill "$l1" "$l2" ;;
  *) echo "run.sh: unknown CONFIG '$config'" >&2; exit 2 ;;
esac
echo "${name}_$config$tag after:  $(uptime)" >>"$here/load.txt"
cat "$out"
