#!/bin/bash
# Issue 33's rows besides the sweeps, 2026-11-29: the 64 MiB allreduce against
# the warm and cold two-thread ceilings (alone.sh, five rounds), then the
# ResNet-50 step from the heap and from kolo memory in place, three rounds.
# usage: final_rows.sh OUTDIR
out=$1; cd "$(dirname "$0")/../../.."
mkdir -p "$out"
docs/perf/ceiling_nov29/alone.sh "$out/ceiling.txt" 5
/usr/bin/python3 docs/perf/ceiling_nov29/table.py "$out/ceiling.txt" > "$out/ceiling_table.md"
: > "$out/resnet.txt"
for i in 1 2 3; do
  for mode in "" "--memory kolo --in-place"; do
    echo "### round $i ${mode:-heap} $(date +%T) load $(cut -d' ' -f1 /proc/loadavg)" >> "$out/resnet.txt"
    mpiexec.mpich -n 2 -bind-to core build/bin/kolo-allreduce-perf -m resnet50 -n 10 -w 3 $mode \
      2>&1 | grep -v "^#" >> "$out/resnet.txt"
  done
done
