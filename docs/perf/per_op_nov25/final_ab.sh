#!/bin/bash
# base (63b6659) vs final (this tree), one binary (main's build), libkolo swapped via LD_LIBRARY_PATH.
# Usage: final_ab.sh PAIRS OUT
N=$1; OUT=$2; : > $OUT
probe() { mpiexec.mpich -bind-to core -n 2 /work/ab/rt 2>/dev/null | tail -1; }
for i in $(seq 1 $N); do
 for c in allreduce allgather broadcast alltoall reducescatter; do
  for L in base new; do
   if [ $c = allreduce ]; then args="-b 8 -e 64K -f 8"; else args="-b 4K -e 64K -f 4"; fi
   p=$(probe)
   mpiexec.mpich -bind-to core -n 2 -env LD_LIBRARY_PATH /work/ab/$L /work/main/build/bin/kolo-allreduce-perf --collective $c $args -n 2000 -r mpi 2>&1 | grep -E "^ +[0-9]" | sed "s/^/$i $c $L /; s/\$/ probe=$p/" >> $OUT
  done
 done
done
