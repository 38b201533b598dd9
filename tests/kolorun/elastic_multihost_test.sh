#!/bin/sh
# kolorun --elastic across the pretend cluster's hosts (labels multihost, elastic). Run
# inside it:
#   tools/pretend_cluster.sh --hosts 2 --command -- tests/kolorun/elastic_multihost_test.sh KOLORUN
# Workers are tests/kolorun/elastic_worker.py (kolo.elastic.run over a pretend world);
# they reach the driver's service across the links. Checks every rank's generation,
# rank and size per epoch:
# 1. a rank on h2 fails in epoch 1: h2 is blacklisted, h1's rank goes on alone;
# 2. discovery adds h2 at epoch 1: generation 1 has a rank on each host, h2's synced
#    to epoch 2 from rank 0.
set -eu
kolorun=$1
here=$(cd "$(dirname "$0")" && pwd)
: "${KOLO_CLUSTER_ENTER:?run me through tools/pretend_cluster.sh --command}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "kolorun elastic multihost test: FAIL: $*" >&2; exit 1; }
elastic() {
  "$kolorun" --elastic --launcher-exec "$KOLO_CLUSTER_ENTER" \
    --launcher-address "$KOLO_CLUSTER_LOCALHOST" "$@"
}
rows() {  # epoch/generation/size/rank@slot of every logged epoch, sorted
  /usr/bin/python3 -c 'import json, sys
print(";".join(sorted("%(epoch)d/%(generation)d/%(size)d/%(rank)d@%(slot)s" % json.loads(l)
                      for l in open(sys.argv[1]))))' "$1"
}
expect() {  # expect WHAT WANT GOT
  [ "$2" = "$3" ] || fail "$1: expected '$2', got '$3'"
  echo "ok: $1: $3"
}

elastic -H h1:1,h2:1 --min-np 1 /usr/bin/python3 "$here/elastic_worker.py" "$tmp/log1" 3 4 \
  0:1:1:1:exit3 || fail "a failure on h2: kolorun exited with $?"
expect "a rank on h2 fails" "0/0/2/0@h1:0;0/0/2/1@h2:0;1/1/1/0@h1:0;2/1/1/0@h1:0" "$(rows "$tmp/log1")"

echo h1:1 >"$tmp/hosts"
elastic -np 1 --host-discovery-script "cat $tmp/hosts" /usr/bin/python3 \
  "$here/elastic_worker.py" "$tmp/log2" 3 4 "0:0:1:0:hosts=$tmp/hosts=h1:1,h2:1" \
  0:0:1:1:await-update || fail "h2 added: kolorun exited with $?"
expect "h2 added at epoch 1" "0/0/1/0@h1:0;1/0/1/0@h1:0;2/1/2/0@h1:0;2/1/2/1@h2:0" \
  "$(rows "$tmp/log2")"
echo "kolorun elastic multihost test: PASS"
