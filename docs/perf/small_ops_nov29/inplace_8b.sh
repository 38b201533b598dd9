#!/bin/bash
# The blocking 8-byte allreduce four ways (heap or kolo memory, out of place or in
# place), ROUNDS rounds alternating, 2 ranks bound, MPI in the same run.
# usage: inplace_8b.sh OUT [ROUNDS]
out=$1; rounds=${2:-3}; cd "$(dirname "$0")/../../.."
: > "$out"
for i in $(seq 1 "$rounds"); do
  for mode in "" "--in-place" "--memory kolo" "--memory kolo --in-place"; do
    echo -n "round $i ${mode:-heap out of place}: " >> "$out"
    mpiexec.mpich -n 2 -bind-to core build/bin/kolo-allreduce-perf -b 8 -e 8 -n 20000 -w 1000 \
      -r mpi --blocking $mode 2>&1 | grep -E "^ +8 " | awk '{print "kolo", $6, "MPI", $10, "ratio", $12}' >> "$out"
  done
done
