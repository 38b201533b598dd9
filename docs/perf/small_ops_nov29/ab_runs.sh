#!/bin/bash
# The A/B runs of docs/perf/small-ops.md, "A call alone": e524d2a (base) against
# this change (cur), alternating, through docs/perf/kolo_memory_nov29/ab.sh.
# Libraries: /tmp/ab/base and /tmp/ab/cur (libkolo.so.0 of each build).
set -e
d=docs/perf/small_ops_nov29
ab=docs/perf/kolo_memory_nov29/ab.sh
export AB_A=base AB_B=cur
$ab $d/blocking.txt 5 -- -b 8 -e 32K -f 4 -n 20000 -w 1000 -r mpi --blocking > $d/blocking.table
$ab $d/async.txt 5 -- -b 8 -e 32K -f 4 -n 20000 -w 1000 -r mpi > $d/async.table
for c in allgather broadcast alltoall reducescatter; do
  $ab $d/$c.txt 3 -- --collective $c -b 4K -e 64K -f 4 -n 5000 -w 200 -r mpi > $d/$c.table
done
