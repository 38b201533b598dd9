#!/bin/bash
# The 64 MiB allreduce from kolo memory against memory_ceiling_bench's two-thread
# ceilings, each loop alone on its buffers (kolo with -r none, as the ceiling
# runs: no other job's buffers between its calls), and kolo with MPI's call
# between its own (-r mpi) for comparison; alternating, RUNS rounds.
# usage: alone.sh OUT RUNS
out=$1; runs=${2:-5}; cd "$(dirname "$0")/../../.."
: > "$out"
for i in $(seq 1 "$runs"); do
  echo "### run $i ceilings $(date +%T) load $(cut -d' ' -f1 /proc/loadavg)" >> "$out"
  taskset -c 0,1 build/bin/memory_ceiling_bench --benchmark_filter='TwoThreadAllreduce.*/67108864' 2>&1 | grep BM_ >> "$out"
  for ref in none mpi; do
    for mode in "--in-place" "-c 1" "-c 0"; do
      echo "### run $i kolo memory -r $ref $mode $(date +%T) load $(cut -d' ' -f1 /proc/loadavg)" >> "$out"
      mpiexec.mpich -n 2 -bind-to core build/bin/kolo-allreduce-perf -b 64M -e 64M -n 20 -w 3 -r $ref \
        --memory kolo $mode 2>&1 | grep -v "^#" >> "$out"
    done
  done
done
