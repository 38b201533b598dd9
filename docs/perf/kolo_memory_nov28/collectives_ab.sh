#!/bin/bash
# A/B: the collectives from kolo_alloc memory, base (03903d5) against new, alternating.
# usage: coll_ab.sh OUT PAIRS
out=$1; pairs=${2:-5}
: > $out
for i in $(seq 1 $pairs); do
  for c in alltoall allgather broadcast reducescatter; do
    for b in base new; do
      echo "### pair $i $c $b $(date +%T) load $(cut -d' ' -f1 /proc/loadavg)" >> $out
      LD_LIBRARY_PATH=/tmp/ab/$b/lib mpiexec.mpich -n 2 -bind-to core /tmp/ab/$b/bin/kolo-allreduce-perf --collective $c -b 1M -e 64M -f 8 -n 20 -w 3 -r mpi --memory kolo 2>&1 | grep -v "^#" >> $out
    done
  done
done
