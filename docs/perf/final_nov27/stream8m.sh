#!/bin/bash
for r in $(seq 1 $1); do
 for thr in 8388608 16777216; do
  for c in allgather alltoall; do
   echo "round $r thr $thr $c $(mpiexec.mpich -bind-to core -n 2 -env KOLO_X_STREAM $thr build/bin/kolo-allreduce-perf --collective $c -b 8M -e 8M -n 100 -r mpi | grep -v '^#' | awk '{printf "%s:%s/%s=%s ", $1, $6, $10, $12}')"
  done
 done
done
