#!/bin/bash
# A/B of the shm engine's shared-direct threshold: 1 MiB (t1m) vs 32 KiB (t32k), interleaved.
out=$1; rounds=${2:-3}
for r in $(seq 1 $rounds); do
  for v in t1m t32k; do
    for c in broadcast reducescatter allgather alltoall; do
      echo "== round $r $v $c"
      LD_LIBRARY_PATH=/tmp/ab/$v mpiexec.mpich -n 2 -bind-to core build/bin/kolo-allreduce-perf --collective $c -b 32K -e 1M -f 2 -n 200 -w 10 -r mpi --memory kolo 2>&1 | grep -v "^#"
    done
  done
done > $out
