#!/bin/bash
# A/B of the socket world 2x1 at 1 MiB: base (HEAD before the change) and new, alternating.
# usage: run.sh ROUNDS OUTDIR
cd /work/main
rounds=${1:-3}; out=${2:-/work/notes/ab29/rows}
mkdir -p "$out"
for r in $(seq 1 "$rounds"); do
  for v in ${VARIANTS:-base new}; do
    SOCKET_RUNS_PPN=1 SOCKET_RUNS_SIZES="-b 1M -e 1M -n 30 -w 5 --breakdown" \
      tools/pretend_cluster.sh --hosts 2 --rate 1gbit --command -- \
      tools/socket_world_runs.sh "$out/$v.$r" 1 /tmp/ab29/$v/${PERF_SCRIPT:-perf.sh} >/dev/null 2>&1
    echo "round $r $v: $(grep -E '^ +1048576' "$out/$v.$r/1gbit_2x1_auto_1.txt" | head -1)"
  done
done
