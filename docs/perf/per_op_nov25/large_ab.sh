#!/bin/bash
N=$1; OUT=$2; : > $OUT
probe() { mpiexec.mpich -bind-to core -n 2 /work/ab/rt 2>/dev/null | tail -1; }
for i in $(seq 1 $N); do
 for L in base new; do
  p=$(probe)
  mpiexec.mpich -bind-to core -n 2 -env LD_LIBRARY_PATH /work/ab/$L /work/main/build/bin/kolo-allreduce-perf -b 1M -e 64M -f 4 -n 20 -r mpi 2>&1 | grep -E "^ +[0-9]" | sed "s/^/$i allreduce $L /; s/\$/ probe=$p/" >> $OUT
  mpiexec.mpich -bind-to core -n 2 -env LD_LIBRARY_PATH /work/ab/$L /work/main/build/bin/kolo-allreduce-perf --collective alltoall -b 1M -e 1M -n 200 -r mpi 2>&1 | grep -E "^ +[0-9]" | sed "s/^/$i alltoall $L /; s/\$/ probe=$p/" >> $OUT
 done
done
