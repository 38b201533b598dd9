#!/bin/sh
# A test program on the socket world across the pretend cluster's hosts, PPN ranks
# on each (block placement: ranks 0..PPN-1 on h1, then h2, ...), started as
# torchrun starts a job: one launch per host (socket_host.sh, through the cluster's
# launcher-exec), which forks that host's ranks with torchrun's variables. So the
# ranks of a host share its /dev/shm and the socket world has its node layer there
# (kolorun --world socket launches each rank on its own, and an isolated pretend
# host gives each launch a /dev/shm of its own). Run inside the cluster:
#   tools/pretend_cluster.sh --hosts H --command -- \
#       tests/multihost/socket_world_test.sh [--ppn P] [--expect ERE] PROGRAM [ARGS...]
# (P defaults to 2; P1,P2,... gives each host its own count, e.g. 2,1 for unequal
# nodes; with --expect, the ranks' output must also hold a line that
# matches the extended regular expression ERE), which provides KOLO_CLUSTER_ENTER (the launcher-exec script)
# and KOLO_CLUSTER_HOSTS. Every rank gets KOLO_WORLD=socket (kolo_init forms the
# socket world or fails, never MPI's) and KOLO_TEST_BARRIER_DIR, a fresh directory
# in /tmp, which the pretend hosts share (tests/multirank/world_barrier.h). The exit
# status is 0 when every rank exits 0, else the first failing host's.
set -u
ppn=2
expect=
while [ $# -ge 2 ]; do
  case $1 in
    --ppn) ppn=$2 ;;
    --expect) expect=$2 ;;
    *) break ;;
  esac
  shift 2
done
if [ $# -lt 1 ]; then
  echo "usage: socket_world_test.sh [--ppn P|P1,P2,...] [--expect ERE] PROGRAM [ARGS...]" >&2
  exit 2
fi
: "${KOLO_CLUSTER_ENTER:?run me through tools/pretend_cluster.sh --command}"
: "${KOLO_CLUSTER_HOSTS:?run me through tools/pretend_cluster.sh --command}"
here=$(cd "$(dirname "$0")" && pwd)
hosts=$(echo "$KOLO_CLUSTER_HOSTS" | tr ',' ' ')
count=$(echo "$hosts" | wc -w)
# One count per host: P for every host, or the list as given.
case $ppn in
  *,*) counts=$(echo "$ppn" | tr ',' ' ') ;;
  *) counts=$(for _ in $hosts; do printf '%s ' "$ppn"; done) ;;
esac
if [ "$(echo $counts | wc -w)" -ne "$count" ]; then
  echo "socket_world_test.sh: --ppn $ppn names $(echo $counts | wc -w) hosts, the cluster has $count" >&2
  exit 2
fi
size=0
for c in $counts; do size=$((size + c)); done
first_host=${hosts%% *}
port=$((20000 + $$ % 20000))
token=$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')
barriers=$(mktemp -d /tmp/kolo-socket-barriers-XXXXXX)
trap 'rm -rf "$barriers"' EXIT
pids=
node=0
first=0
for host in $hosts; do
  here_ranks=$(echo $counts | cut -d' ' -f$((node + 1)))
  set -- "$KOLO_CLUSTER_ENTER" "$host" "$here/socket_host.sh" "$node" "$first" "$here_ranks" \
    "$size" "$first_host" "$port" "$token" "$barriers" "$@"
  # (--expect: each host's output to a file, shown and searched at the end)
  if [ -n "$expect" ]; then "$@" >"$barriers/out.$node" 2>&1 & else "$@" & fi
  pids="$pids $!"
  shift 11
  node=$((node + 1))
  first=$((first + here_ranks))
done
status=0
for pid in $pids; do
  wait "$pid" || { rc=$?; [ "$status" -eq 0 ] && status=$rc; }
done
if [ -n "$expect" ]; then
  cat "$barriers"/out.*
  if [ "$status" -eq 0 ] && ! cat "$barriers"/out.* | grep -Eq -- "$expect"; then
    echo "socket_world_test.sh: no line of the output matches: $expect" >&2
    status=1
  fi
fi
[ "$status" -eq 0 ] || echo "socket_world_test.sh: failed with status $status" >&2
exit "$status"
