#!/bin/bash
# The blocking allreduce against the asynchronous call, and both against the
# library before this change (BASE, a build of d0e28ea), 2 ranks bound, MPI
# measured in the same run. Rounds interleave the three; each line: variant,
# size, kolo us, MPI us, MPI / kolo.
# usage: blocking_ab.sh BASE_BUILD NEW_BUILD ROUNDS
BASE=$1 NEW=$2 ROUNDS=${3:-5}
for i in $(seq 1 "$ROUNDS"); do
  for v in base async blocking; do
    case $v in
      base) bin=$BASE/bin/kolo-allreduce-perf; flag="" ;;
      async) bin=$NEW/bin/kolo-allreduce-perf; flag="" ;;
      blocking) bin=$NEW/bin/kolo-allreduce-perf; flag="--blocking" ;;
    esac
    mpiexec.mpich -n 2 -bind-to core "$bin" -b 8 -e 32K -f 4 -n 20000 -w 1000 -r mpi $flag 2>&1 |
      awk -v v=$v -v r=$i '/^ +[0-9]+ +[0-9]+ /{print r, v, $1, $6, $10, $12}'
  done
done
