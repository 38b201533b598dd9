#!/bin/sh
# A test program on the socket world across the pretend cluster's hosts, 2 hosts x
# 2 ranks (ranks 0-1 on h1, 2-3 on h2), started as torchrun starts a job: one
# launch per host (socket_host.sh, through the cluster's launcher-exec), which
# forks that host's ranks with torchrun's variables. So the ranks of a host share
# its /dev/shm and the socket world has its node layer there (kolorun --world
# socket launches each rank on its own, and an isolated pretend host gives each
# launch a /dev/shm of its own). Run inside the cluster:
#   tools/pretend_cluster.sh --hosts 2 --command -- tests/multihost/socket_world_test.sh PROGRAM
# which provides KOLO_CLUSTER_ENTER (the launcher-exec script). The exit status is
# 0 when every rank exits 0.
set -u
program=$1
: "${KOLO_CLUSTER_ENTER:?run me through tools/pretend_cluster.sh --command}"
here=$(cd "$(dirname "$0")" && pwd)
port=$((20000 + $$ % 20000))
token=$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')
"$KOLO_CLUSTER_ENTER" h1 "$here/socket_host.sh" 0 2 4 h1 "$port" "$token" "$program" &
first=$!
"$KOLO_CLUSTER_ENTER" h2 "$here/socket_host.sh" 1 2 4 h1 "$port" "$token" "$program" &
second=$!
status=0
wait "$first" || status=$?
wait "$second" || status=$?
exit "$status"
