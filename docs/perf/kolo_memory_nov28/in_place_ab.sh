#!/bin/bash
# A/B: allreduce in place and out of place, heap and kolo memory, the library at
# 03903d5 (base) against the new one; the same bench binary (new: it has --in-place).
# usage: inplace_ab.sh OUT PAIRS
out=$1; pairs=${2:-5}
: > $out
for i in $(seq 1 $pairs); do
  for mem in heap kolo; do
    for ip in in-place out-of-place; do
      flag=""; [ $ip = in-place ] && flag=--in-place
      for b in base new; do
        echo "### pair $i ${mem}_$ip $b $(date +%T) load $(cut -d' ' -f1 /proc/loadavg)" >> $out
        LD_LIBRARY_PATH=/tmp/ab/$b/lib mpiexec.mpich -n 2 -bind-to core /tmp/ab/new/bin/kolo-allreduce-perf -b 1M -e 64M -f 4 -n 20 -w 3 -r mpi --memory $mem $flag 2>&1 | grep -v "^#" >> $out
      done
    done
  done
done
