#!/bin/bash
# Each collective at 64 MiB from kolo memory against memory_ceiling_bench's two-thread
# ceiling for it (plain /0 and streaming /1 stores), alternating. usage: ceiling_coll.sh OUT RUNS
out=$1; runs=${2:-3}; cd /work/main
: > $out
for i in $(seq 1 $runs); do
  for c in allgather alltoall broadcast reducescatter; do
    echo "### run $i $c ceiling $(date +%T) load $(cut -d' ' -f1 /proc/loadavg)" >> $out
    taskset -c 0,1 build/bin/memory_ceiling_bench --benchmark_filter="Ceiling/$c/67108864/" 2>&1 | grep BM_ >> $out
    echo "### run $i $c kolo $(date +%T) load $(cut -d' ' -f1 /proc/loadavg)" >> $out
    mpiexec.mpich -n 2 -bind-to core build/bin/kolo-allreduce-perf --collective $c -b 64M -e 64M -n 20 -w 3 -r mpi --memory kolo 2>&1 | grep -v "^#" >> $out
  done
done
