#!/usr/bin/env bash
# carry_sweep.sh ROUNDS OUT: every collective 8 B / 4 KiB-64 KiB, KOLO_AND_CARRY_BYTES 0 and 4K
# alternating; then allreduce 1M-64M and ResNet-50 (-m resnet50), both settings alternating.
rounds=${1:-3}; out=${2:-sweep_rows.txt}
cd /work/main
for i in $(seq 1 "$rounds"); do
  for c in allreduce allgather broadcast alltoall reducescatter; do
    for k in 0 4K; do
      echo "## round $i collective $c carry $k" >> "$out"
      b=4K; [[ $c == allreduce ]] && b=8
      mpiexec.mpich -bind-to core -n 2 -env KOLO_AND_CARRY_BYTES $k build/bin/kolo-allreduce-perf \
        --collective $c -b $b -e 64K -f 4 -n 2000 -r mpi 2>&1 | grep -E "^ +[0-9]" >> "$out"
    done
  done
done
for i in $(seq 1 "$rounds"); do
  for k in 0 4K; do
    echo "## round $i collective allreduce carry $k" >> "$out"
    mpiexec.mpich -bind-to core -n 2 -env KOLO_AND_CARRY_BYTES $k build/bin/kolo-allreduce-perf \
      -b 1M -e 64M -f 8 -n 20 -r mpi 2>&1 | grep -E "^ +[0-9]" >> "$out"
    echo "## round $i resnet50 carry $k" >> "$out"
    mpiexec.mpich -bind-to core -n 2 -env KOLO_AND_CARRY_BYTES $k build/bin/kolo-allreduce-perf \
      -m resnet50 2>&1 | grep -E "^  (kolo|mpi)_" >> "$out"
  done
done
