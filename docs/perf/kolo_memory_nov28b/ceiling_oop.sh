#!/bin/bash
# The 64 MiB allreduce from kolo memory, out of place and in place, against
# memory_ceiling_bench's two-thread allreduce in place and out of place,
# alternating. usage: ceiling_oop.sh OUT RUNS
out=$1; runs=${2:-3}; cd "$(dirname "$0")/../../.."
: > "$out"
for i in $(seq 1 "$runs"); do
  echo "### run $i ceilings $(date +%T) load $(cut -d' ' -f1 /proc/loadavg)" >> "$out"
  taskset -c 0,1 build/bin/memory_ceiling_bench --benchmark_filter='TwoThreadAllreduce.*/67108864' 2>&1 | grep BM_ >> "$out"
  for mode in "-c 1" "-c 0" "--in-place"; do
    echo "### run $i kolo memory $mode $(date +%T) load $(cut -d' ' -f1 /proc/loadavg)" >> "$out"
    mpiexec.mpich -n 2 -bind-to core build/bin/kolo-allreduce-perf -b 64M -e 64M -n 20 -w 3 -r mpi \
      --memory kolo $mode 2>&1 | grep -v "^#" >> "$out"
  done
done
