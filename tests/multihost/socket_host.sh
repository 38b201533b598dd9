#!/bin/sh
# One pretend host's ranks of a socket-world job (socket_world_test.sh):
#   socket_host.sh NODE FIRST_RANK PPN WORLD_SIZE MASTER_ADDR MASTER_PORT TOKEN BARRIER_DIR \
#       PROGRAM [ARGS...]
# forks ranks FIRST_RANK .. FIRST_RANK+PPN-1 with torchrun's variables and waits
# for them; the exit status is the first failing rank's, else 0.
set -u
node=$1 first=$2 ppn=$3 size=$4 master=$5 port=$6 token=$7 barriers=$8
shift 8
pids=
local_rank=0
while [ "$local_rank" -lt "$ppn" ]; do
  RANK=$((first + local_rank)) WORLD_SIZE=$size LOCAL_RANK=$local_rank \
    LOCAL_WORLD_SIZE=$ppn GROUP_RANK=$node MASTER_ADDR=$master MASTER_PORT=$port \
    KOLO_JOB_TOKEN=$token KOLO_WORLD=socket KOLO_TEST_BARRIER_DIR=$barriers "$@" &
  pids="$pids $!"
  local_rank=$((local_rank + 1))
done
status=0
rank=$first
for pid in $pids; do
  wait "$pid"
  rc=$?
  if [ "$rc" -ne 0 ]; then
    echo "socket_host.sh: rank $rank on $(hostname) exited with status $rc" >&2
    [ "$status" -eq 0 ] && status=$rc
  fi
  rank=$((rank + 1))
done
exit "$status"
