#!/bin/sh
# kolorun across the pretend cluster's hosts (label multihost). Run inside it:
#   tools/pretend_cluster.sh --hosts 2 --command -- tests/kolorun/multihost_test.sh KOLORUN DEMO
# which provides KOLO_CLUSTER_ENTER (the launcher-exec script) and
# KOLO_CLUSTER_LOCALHOST (the launcher's address). Checks, through kolorun only:
# 1. block placement: -np 3 on h1:2,h2:2 puts ranks 0-1 on h1 and rank 2 on h2;
# 2. binding: each rank is bound to one core, different cores on one host (--no-bind:
#    the same cores as this shell);
# 3. a knob flag and -x reach every rank on both hosts;
# 4. the training demo at 2 hosts x 2 ranks, hierarchical allreduce for every bucket,
#    matches its single-process replay;
# 5. the socket world: each rank's variables on its host, a failing rank's status,
#    and the training demo at 2 hosts x 2 ranks (shm on each host, TCP between).
set -eu
kolorun=$1 demo=$2
: "${KOLO_CLUSTER_ENTER:?run me through tools/pretend_cluster.sh --command}"
cluster() {
  "$kolorun" --launcher ssh --launcher-exec "$KOLO_CLUSTER_ENTER" \
    --mpi-args "-localhost $KOLO_CLUSTER_LOCALHOST" "$@"
}
fail() { echo "kolorun multihost test: FAIL: $*" >&2; exit 1; }
expect() {  # expect WHAT WANT GOT
  [ "$2" = "$3" ] || fail "$1: expected '$2', got '$3'"
  echo "ok: $1: $3"
}

hosts=$(cluster -np 3 -H h1:2,h2:2 hostname | sort | tr '\n' ' ')
expect "ranks per host" "h1 h1 h2 " "$hosts"

report='echo "$(hostname) $(sed -n "s/^Cpus_allowed_list:[[:space:]]*//p" /proc/self/status)"'
bound=$(cluster -np 4 -H h1:2,h2:2 sh -c "$report" | sort)
[ "$(echo "$bound" | awk '{print $2}' | grep -c '^[0-9]*$')" = 4 ] ||
  fail "each rank bound to one core: got $(echo "$bound" | tr '\n' ';')"
[ "$(echo "$bound" | sort -u | wc -l)" = 4 ] ||
  fail "the two ranks of a host on different cores: got $(echo "$bound" | tr '\n' ';')"
echo "ok: bound to one core each: $(echo "$bound" | tr '\n' ';')"
mine=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status)
free=$(cluster --no-bind -np 2 -H h1,h2 sh -c "$report" | awk '{print $2}' | sort -u | tr -d '\n')
expect "--no-bind leaves this shell's cores" "$mine" "$free"

vars=$(cluster -np 4 -H h1:2,h2:2 --cycle-time-ms 3 -x KOLORUN_TEST_VAR="a b" \
  sh -c 'echo "$(hostname) $KOLO_CYCLE_TIME_MS $KOLORUN_TEST_VAR"' | sort | tr '\n' ';')
expect "knob and -x on every rank" "h1 3 a b;h1 3 a b;h2 3 a b;h2 3 a b;" "$vars"

cluster -np 4 -H h1:2,h2:2 --hierarchical-allreduce "$demo" --check-single ||
  fail "kolo-train-demo --check-single at 2 hosts x 2 ranks"

# 5. the socket world (no mpiexec): each rank on its host with its variables, rank 0's
#    host as the master; a failing rank on h2 stops the rank on h1.
socket() {
  "$kolorun" --world socket --launcher-exec "$KOLO_CLUSTER_ENTER" \
    --launcher-address "$KOLO_CLUSTER_LOCALHOST" "$@"
}
vars=$(socket -np 3 -H h1:2,h2:2 --cycle-time-ms 3 sh -c \
  'echo "$(hostname) $RANK/$WORLD_SIZE $LOCAL_RANK/$LOCAL_WORLD_SIZE $GROUP_RANK $MASTER_ADDR $KOLO_WORLD $KOLO_CYCLE_TIME_MS"' |
  sort | tr '\n' ';')
expect "socket world across hosts" \
  "h1 0/3 0/2 0 h1 socket 3;h1 1/3 1/2 0 h1 socket 3;h2 2/3 0/1 1 h1 socket 3;" "$vars"
set +e
socket -np 2 -H h1,h2 sh -c '[ "$RANK" = 1 ] && exit 7; sleep 60' 2>/dev/null
status=$?
set -e
expect "socket world: the failing rank's status" 7 "$status"
socket -np 4 -H h1:2,h2:2 "$demo" --check-single ||
  fail "kolo-train-demo --check-single on the socket world at 2 hosts x 2 ranks"
echo "ok: the training demo on the socket world at 2 hosts x 2 ranks"
echo "kolorun multihost test: PASS"
