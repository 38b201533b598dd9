#!/usr/bin/env bash
# MPI_Finalize ends over TCP between pretend hosts (Note [A close that waits for a
# peer in the PMI barrier] in tools/pretend_cluster_close.c): RUNS launches of PROBE
# in one cluster of 2 hosts x 2 ranks, each must end with exit 0 before the cluster's
# timeout. Without the tool's fix, under load (load average 15-30 from parallel
# builds), 1 run in 6 of this probe hung after printing OK; on a quiet machine the
# window is small and the test may pass without the fix.
#   finalize_test.sh TOOL PROBE [RUNS]
set -uo pipefail
tool=$1 probe=$2 runs=${3:-10}
"$tool" --hosts 2 --timeout 200 --command -- bash -c '
  for ((i = 1; i <= $2; i++)); do
    mpiexec.mpich -launcher ssh -launcher-exec "$KOLO_CLUSTER_ENTER" \
      -localhost "$KOLO_CLUSTER_LOCALHOST" -hosts "$KOLO_CLUSTER_HOSTS" \
      -ppn 2 -n 4 "$1" || { echo "finalize_test: run $i failed"; exit 1; }
  done
  echo "finalize_test: $2 runs ended"' finalize_test "$probe" "$runs"
