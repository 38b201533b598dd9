#!/bin/bash
# Where a small operation's time goes, every collective: kolo-allreduce-perf
# --breakdown beside MPI (-r mpi), 2 ranks bound to cores, RUNS runs each.
# Usage: docs/perf/final_nov27/breakdown.sh RUNS [BUILD] > rows.txt
# Each row: collective, size, run, kolo us, MPI us, then both ranks' breakdown lines.
runs=${1:-3}
build=${2:-build}
for r in $(seq 1 "$runs"); do
  for c in allreduce allgather broadcast alltoall reducescatter; do
    if [ "$c" = allreduce ]; then sizes="-b 8 -e 8K -f 32"; else sizes="-b 4K -e 16K -f 4"; fi
    echo "## run $r $c $(date -u +%H:%M:%S)"
    mpiexec.mpich -bind-to core -n 2 "$build/bin/kolo-allreduce-perf" --collective "$c" $sizes \
      -n 3000 -r mpi --breakdown | grep -E '^ +[0-9]|breakdown rank'
  done
done
