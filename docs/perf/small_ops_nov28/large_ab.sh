#!/bin/bash
# Large allreduces and the ResNet-50 step: the library before the blocking call
# (BASE, a build of d0e28ea) and this tree, alternating; each line: round, variant,
# size, kolo us, MPI us, MPI / kolo (or the -m resnet50 kolo_fused row).
# usage: large_ab.sh BASE_BUILD NEW_BUILD ROUNDS
BASE=$1 NEW=$2 ROUNDS=${3:-3}
for i in $(seq 1 "$ROUNDS"); do
  for v in base new; do
    bin=$NEW/bin/kolo-allreduce-perf
    [ $v = base ] && bin=$BASE/bin/kolo-allreduce-perf
    mpiexec.mpich -n 2 -bind-to core "$bin" -b 1M -e 64M -f 8 -n 20 -w 3 -r mpi 2>&1 |
      awk -v v=$v -v r=$i '/^ +[0-9]+ +[0-9]+ /{print r, v, $1, $6, $10, $12}'
    mpiexec.mpich -n 2 -bind-to core "$bin" -m resnet50 -n 10 -w 3 2>&1 |
      awk -v v=$v -v r=$i '/kolo_fused/{print r, v, "resnet50", $0}'
  done
done
