#!/bin/bash
for r in $(seq 1 $1); do
 for thr in 4096 16384 65536; do
   echo "round $r small $thr $(mpiexec.mpich -bind-to core -n 2 -env KOLO_X_SMALL $thr build/bin/kolo-allreduce-perf -b 4K -e 64K -f 2 -n 3000 -r mpi | grep -v '^#' | awk '{printf "%s:%s/%s=%s ", $1, $6, $10, $12}')"
 done
done
