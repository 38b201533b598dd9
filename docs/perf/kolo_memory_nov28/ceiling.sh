#!/bin/bash
# The 64 MiB allreduce from kolo memory and the heap against memory_ceiling_bench's
# two-thread allreduce (which works in place), alternating.
# usage: ceiling_ab.sh OUT RUNS [--in-place]
out=$1; runs=${2:-3}; IP=${3:-}; cd /work/main
: > $out
for i in $(seq 1 $runs); do
  echo "### run $i ceiling $(date +%T) load $(cut -d' ' -f1 /proc/loadavg)" >> $out
  taskset -c 0,1 build/bin/memory_ceiling_bench --benchmark_filter='TwoThreadAllreduce/67108864' --benchmark_counters_tabular=true 2>&1 | grep BM_ >> $out
  for m in kolo heap; do
    echo "### run $i allreduce $m $(date +%T) load $(cut -d' ' -f1 /proc/loadavg)" >> $out
    mpiexec.mpich -n 2 -bind-to core build/bin/kolo-allreduce-perf -b 64M -e 64M -n 20 -w 3 -r mpi --memory $m $IP 2>&1 | grep -v "^#" >> $out
  done
done
