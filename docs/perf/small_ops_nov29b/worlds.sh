#!/bin/bash
# One host, 2 ranks bound: the MPI world against the socket world (issue 29's "within
# 5 %"), alternating, ROUNDS pairs, the blocking allreduce with MPI_Allreduce
# interleaved; kolo's us / MPI's us = MPI÷kolo per size. usage: worlds.sh OUT ROUNDS
out=$1; rounds=${2:-3}
: > $out
for i in $(seq 1 $rounds); do
  for w in mpi socket; do
    port=$((29500 + i))
    line=$(mpiexec.mpich -n 2 -bind-to core sh -c '
      if [ "'$w'" = socket ]; then
        export RANK=$PMI_RANK WORLD_SIZE=$PMI_SIZE MASTER_ADDR=127.0.0.1 MASTER_PORT='$port' KOLO_WORLD=socket
      fi
      exec build/bin/kolo-allreduce-perf -b 8 -e 8K -f 16 -n 20000 -w 1000 -r mpi --blocking' 2>&1 |
      grep -v '^#' | awk '{printf "%s:%s/%s=%s  ", $1, $6, $10, $12}')
    echo "$w $line" >> $out
  done
done
cat $out
