#!/bin/sh
# kolorun --elastic over kolo's real socket world across the pretend cluster's two
# hosts (labels multihost, elastic): PyTorch workers (elastic_torch_worker.py), one
# on each host. Run inside it:
#   tools/pretend_cluster.sh --hosts 2 --command -- \
#     tests/kolorun/elastic_world_multihost_test.sh KOLORUN
# 1. h2's rank SIGKILLed mid-batch: h1's rank re-forms alone and trains on;
# 2. h2's link cut mid-run (KOLO_PEER_TIMEOUT_SECONDS=2): h1's rank gives h2 up after
#    the timeout, the driver stops h2's worker past --elastic-timeout (it can reach
#    nobody), and h1's rank trains on alone.
# Checks every rank's epoch/generation/size/rank and that the job ends well; prints
# the time from the death (or the cut) to training resumed on h1.
set -eu
kolorun=$1
here=$(cd "$(dirname "$0")" && pwd)
: "${KOLO_CLUSTER_ENTER:?run me through tools/pretend_cluster.sh --command}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "kolorun elastic world multihost test: FAIL: $*" >&2; exit 1; }
elastic() {
  ELASTIC_WORKER_DIR=$tmp OMP_NUM_THREADS=1 KOLO_FLIGHT_RECORDER=0 \
    "$kolorun" --elastic --launcher-exec "$KOLO_CLUSTER_ENTER" \
    --launcher-address "$KOLO_CLUSTER_LOCALHOST" "$@"
}
rows() {  # epoch/generation/size/rank of every logged epoch, sorted
  /usr/bin/python3 -c 'import json, sys
print(";".join(sorted("%(epoch)d/%(generation)d/%(size)d/%(rank)d" % d
                      for d in map(json.loads, (l for l in open(sys.argv[1]) if l.startswith("{")))
                      if "epoch" in d)))' "$1"
}
resumed_after() {  # seconds from time $2 to the first "resumed" line of $1
  /usr/bin/python3 -c 'import json, sys
t = [json.loads(l)["resumed"] for l in open(sys.argv[1]) if "\"resumed\"" in l]
print("%.2f" % (min(t) - float(sys.argv[2])))' "$1" "$2"
}
expect() {  # expect WHAT WANT GOT
  [ "$2" = "$3" ] || fail "$1: expected '$2', got '$3'"
  echo "ok: $1: $3"
}

elastic -H h1:1,h2:1 --min-np 1 /usr/bin/python3 "$here/elastic_torch_worker.py" 3 \
  0:1:1:3:kill >"$tmp/out1" 2>"$tmp/err1" || { cat "$tmp/err1" >&2; fail "h2 killed: kolorun exited with $?"; }
expect "h2's rank killed" "0/0/2/0;0/0/2/1;1/1/1/0;2/1/1/0" "$(rows "$tmp/out1")"
echo "h2's rank killed: training resumed on h1 $(resumed_after "$tmp/out1" "$(cat "$tmp"/died_at.1)") s after the death"

KOLO_PEER_TIMEOUT_SECONDS=2 elastic -H h1:1,h2:1 --min-np 1 --elastic-timeout 3 \
  /usr/bin/python3 "$here/elastic_torch_worker.py" 6 step_seconds=0.1 >"$tmp/out2" 2>"$tmp/err2" &
job=$!
# The cut once both ranks are in epoch 1 (epoch 0 logged twice).
for _ in $(seq 600); do
  [ "$(grep -c '"epoch": 0' "$tmp/out2" 2>/dev/null || true)" -ge 2 ] && break
  sleep 0.1
done
cut_at=$(date +%s.%N)
"$KOLO_CLUSTER_LINK" h2 cut
status=0
wait $job || status=$?
"$KOLO_CLUSTER_LINK" h2 restore
[ $status -eq 0 ] || { cat "$tmp/err2" >&2; fail "h2's link cut: kolorun exited with $status"; }
grep -q "did not re-form within 3 s (--elastic-timeout)" "$tmp/err2" ||
  { cat "$tmp/err2" >&2; fail "h2's link cut: the driver did not give h2's worker up"; }
last=$(rows "$tmp/out2" | tr ';' '\n' | grep '^5/' | tr '\n' ';')
case "$last" in
  5/[1-9]/1/0\;) echo "ok: h2's link cut: h1's rank ends alone ($last)" ;;
  *) fail "h2's link cut: the last epoch's rows are '$last'" ;;
esac
echo "h2's link cut: training resumed on h1 $(resumed_after "$tmp/out2" "$cut_at") s after the cut (KOLO_PEER_TIMEOUT_SECONDS=2)"
echo "kolorun elastic world multihost test: PASS"
