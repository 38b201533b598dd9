#!/usr/bin/env bash
# carry_ab.sh ROUNDS OUT: every collective at 4K-16K with KOLO_AND_CARRY_BYTES 0 / 4K / 16K,
# interleaved, 2 ranks bound to cores, MPI warm beside each.
rounds=${1:-3}; out=${2:-carry_rows.txt}
cd /work/main
for i in $(seq 1 "$rounds"); do
  for c in allreduce allgather broadcast alltoall reducescatter; do
    for k in 0 4K 16K; do
      echo "## round $i collective $c carry $k" >> "$out"
      mpiexec.mpich -bind-to core -n 2 -env KOLO_AND_CARRY_BYTES $k build/bin/kolo-allreduce-perf \
        --collective $c -b 4K -e 16K -f 4 -n 2000 -r mpi 2>&1 | grep -E "^ +[0-9]" >> "$out"
    done
  done
done
