#!/bin/bash
# The ResNet-50 gradient set's step (kolo-allreduce-perf -m resnet50), from the
# heap and from kolo memory in place, ROUNDS rounds (default 3), appended to OUT.
# usage: resnet_rows.sh OUT [ROUNDS]
out=$1; rounds=${2:-3}; cd "$(dirname "$0")/../.."
for i in $(seq 1 "$rounds"); do
  for mode in "" "--memory kolo --in-place"; do
    echo "### round $i ${mode:-heap} $(date +%T) load $(cut -d' ' -f1 /proc/loadavg)" >> "$out"
    mpiexec.mpich -n 2 -bind-to core build/bin/kolo-allreduce-perf -m resnet50 -n 10 -w 3 $mode \
      2>&1 | grep -v "^#" >> "$out"
  done
done
