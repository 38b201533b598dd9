#!/bin/bash
# kolo_init's time, the socket world against the MPI world, on this host: for each
# rank count, RUNS jobs of each world, interleaved, and the median of each column
# (bench/init_time.cc). Both worlds are launched by mpiexec (the socket world takes
# torchrun's variables from the PMI ones), so the launcher's own cost is the same.
#   bench/init_time.sh [BUILD_DIR] [RUNS] [RANKS...]     defaults: build 5 2 4 8
set -euo pipefail
build=${1:-build}; runs=${2:-5}; shift 2 2>/dev/null || shift $#
ranks=${*:-2 4 8}
tool=$build/bin/kolo-init-time
export KOLO_LIBRARY=$PWD/$build/lib/libkolo.so
port=$((29500 + RANDOM % 400))
one() {  # world ranks
  if [[ $1 == mpi ]]; then
    KOLO_WORLD=mpi timeout 120 mpiexec.mpich -n "$2" "$tool"
  else
    port=$((port + 1))
    timeout 120 mpiexec.mpich -n "$2" sh -c 'RANK=$PMI_RANK WORLD_SIZE=$PMI_SIZE \
      LOCAL_RANK=$PMI_RANK LOCAL_WORLD_SIZE=$PMI_SIZE MASTER_ADDR=127.0.0.1 \
      MASTER_PORT='"$port"' KOLO_WORLD=socket exec '"$tool"
  fi
}
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
echo "# world ranks init_ms first_op_ms shutdown_ms   (median of $runs jobs)"
for n in $ranks; do
  rows_mpi=""; rows_socket=""
  for ((i = 0; i < runs; i++)); do
    rows_mpi+=$(one mpi "$n")$'\n'
    rows_socket+=$(one socket "$n")$'\n'
  done
  for w in mpi socket; do
    rows=rows_$w
    printf '%-6s %5d' "$w" "$n"
    for col in 3 4 5; do
      printf ' %11s' "$(printf '%s' "${!rows}" | awk -v c=$col 'NF {print $c}' | median)"
    done
    echo
  done
done
