#!/bin/bash
# -m resnet50 in four modes, interleaved: heap or kolo memory, out of place or in place.
# usage: resnet_modes.sh OUT RUNS
out=$1; runs=${2:-3}; cd /work/main
: > $out
for i in $(seq 1 $runs); do
  for mode in "" "--in-place" "--memory kolo" "--in-place --memory kolo"; do
    echo "### run $i mode [${mode:-heap out of place}] $(date +%T) load $(cut -d' ' -f1 /proc/loadavg)" >> $out
    timeout 600 mpiexec.mpich -n 2 -bind-to core build/bin/kolo-allreduce-perf -m resnet50 -n 10 -w 3 $mode 2>&1 | grep -E "^  |model" >> $out
  done
done
