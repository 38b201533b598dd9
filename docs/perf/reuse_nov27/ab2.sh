#!/usr/bin/env bash
# ab2.sh ROUNDS OUT: the libkolo in $BASE_LIB (a directory holding the old libkolo.so.0) against
# build/lib, alternating within each round: 8 B allreduce, 4 KiB allgather; 2 ranks bound.
rounds=${1:-3}; out=${2:-ab_rows.txt}
cd "$(dirname "${BASH_SOURCE[0]}")/../../.."
for i in $(seq 1 "$rounds"); do
  for v in base new; do
    lib=/work/main/build/lib; [[ $v == base ]] && lib=${BASE_LIB:-/work/notes/s11/base}
    echo "## round $i $v allreduce" >> "$out"
    mpiexec.mpich -bind-to core -n 2 -env LD_LIBRARY_PATH $lib build/bin/kolo-allreduce-perf \
      -b 8 -e 8 -n 5000 -r mpi 2>&1 | grep -E "^ +[0-9]" >> "$out"
    echo "## round $i $v allgather" >> "$out"
    mpiexec.mpich -bind-to core -n 2 -env LD_LIBRARY_PATH $lib build/bin/kolo-allreduce-perf \
      --collective allgather -b 4K -e 4K -n 5000 -r mpi 2>&1 | grep -E "^ +[0-9]" >> "$out"
  done
done
