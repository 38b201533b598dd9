#!/bin/bash
N=$1; OUT=$2; shift 2; LIBS="$@"
probe() { mpiexec.mpich -bind-to core -n 2 /work/ab/rt 2>/dev/null | tail -1; }
for i in $(seq 1 $N); do
 for L in $LIBS; do
  p=$(probe)
  mpiexec.mpich -bind-to core -n 2 -env LD_LIBRARY_PATH /work/ab/$L /work/main/build/bin/kolo-allreduce-perf -m resnet50 2>&1 | grep -E "^  (kolo|mpi)" | sed "s/^/$i $L probe=$p /" >> $OUT
 done
 LIBS=$(echo $LIBS | awk '{for(i=NF;i>0;i--) printf "%s ", $i}')
done
