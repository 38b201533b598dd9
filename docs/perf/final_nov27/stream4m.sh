#!/bin/bash
for r in $(seq 1 $1); do
 for thr in 4194304 8388608; do
  for c in allgather alltoall broadcast; do
   echo "round $r thr $thr $c $(mpiexec.mpich -bind-to core -n 2 -env KOLO_X_STREAM $thr build/bin/kolo-allreduce-perf --collective $c -b 4M -e 4M -n 200 -r mpi | grep -v '^#' | awk '{printf "%s:%s/%s=%s ", $1, $6, $10, $12}')"
  done
 done
done
