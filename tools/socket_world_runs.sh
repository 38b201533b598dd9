#!/bin/sh
# The socket world's rows in docs/socket-world.md and docs/scaling.md: kolo-allreduce-perf
# on 2 pretend hosts x 1 and x 2 ranks, kolo in the socket world (KOLO_WORLD=socket,
# torchrun's variables from the PMI ones; the tool itself times with MPI, so it
# runs in an MPI job) against MPI_Allreduce (-r mpi) in the same run, REPEAT times,
# alternating the two shapes. Run inside the cluster:
#   tools/pretend_cluster.sh --hosts 2 --rate 1gbit --command -- \
#       tools/socket_world_runs.sh OUT_DIR [REPEAT] [PERF]
# Writes OUT_DIR/1gbit_2x<P>_auto_<repeat>.txt (the names tools/scaling_model.py
# check reads; transport auto) and OUT_DIR/load.txt (uptime before each run).
# PERF defaults to build/bin/kolo-allreduce-perf; SOCKET_RUNS_SIZES to the sweep.
set -u
out=${1:?usage: socket_world_runs.sh OUT_DIR [REPEAT] [PERF]}
repeat=${2:-3}
perf=${3:-build/bin/kolo-allreduce-perf}
: "${KOLO_CLUSTER_ENTER:?run me through tools/pretend_cluster.sh --command}"
sizes=${SOCKET_RUNS_SIZES:--b 4 -e 64M -f 4 -n 5 -w 1}
mkdir -p "$out"
r=1
while [ "$r" -le "$repeat" ]; do
  for ppn in ${SOCKET_RUNS_PPN:-1 2}; do
    echo "$r 2x$ppn $(uptime)" >>"$out/load.txt"
    # Each rank becomes a socket-world rank; h1 (10.77.0.1) serves the store.
    # shellcheck disable=SC2086,SC2016
    mpiexec.mpich -launcher ssh -launcher-exec "$KOLO_CLUSTER_ENTER" \
      -localhost "$KOLO_CLUSTER_LOCALHOST" -hosts "$KOLO_CLUSTER_HOSTS" \
      -ppn "$ppn" -n $((2 * ppn)) sh -c 'exec env RANK=$PMI_RANK WORLD_SIZE=$PMI_SIZE \
        MASTER_ADDR=10.77.0.1 MASTER_PORT='$((29800 + 10 * r + ppn))' KOLO_WORLD=socket "$@"' \
      rank "$perf" $sizes -r mpi >"$out/1gbit_2x${ppn}_auto_$r.txt" 2>&1 ||
      echo "socket_world_runs: 2x$ppn run $r exited $?" >&2
  done
  r=$((r + 1))
done
