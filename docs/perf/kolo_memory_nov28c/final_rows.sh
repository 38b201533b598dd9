#!/bin/bash
# Issue 33's closing rows besides the sweeps: the 64 MiB allreduce against the
# two-thread ceilings (kolo_memory_nov28b/ceiling_oop.sh, three runs), then the
# ResNet-50 step from the heap and from kolo memory in place, three rounds.
# usage: final_rows.sh OUTDIR
out=$1; cd "$(dirname "$0")/../../.."
mkdir -p "$out"
docs/perf/kolo_memory_nov28b/ceiling_oop.sh "$out/ceiling.txt" 3
: > "$out/resnet.txt"
for i in 1 2 3; do
  for mode in "" "--memory kolo --in-place"; do
    echo "### round $i ${mode:-heap} $(date +%T) load $(cut -d' ' -f1 /proc/loadavg)" >> "$out/resnet.txt"
    mpiexec.mpich -n 2 -bind-to core build/bin/kolo-allreduce-perf -m resnet50 -n 10 -w 3 $mode \
      2>&1 | grep -v "^#" >> "$out/resnet.txt"
  done
done
