#!/bin/bash
# The runs of docs/perf/small-ops.md, "Blocking forms of the other collectives; the
# carry shares the vector's line". Libraries (libkolo.so.0 of each build):
#   /tmp/ab/blk   c8a427a: the blocking forms; the carry on lines of its own
#   /tmp/ab/line  the carry of a small allreduce in the vector's line (ec74253)
# 1. Allreduce, blk against line, alternating (kolo_memory_nov29/ab.sh), heap buffers.
# 2. The other collectives with the line library: the asynchronous call and
#    kolo_wait against the blocking form, alternating, MPI ÷ kolo per round.
# 3. Four ranks on the two cores, unbound, 8 B, blocking and asynchronous.
set -e
d=docs/perf/small_ops_nov29b
ab=docs/perf/kolo_memory_nov29/ab.sh
perf=build/bin/kolo-allreduce-perf
AB_A=blk AB_B=line $ab $d/blocking.txt 5 -- -b 8 -e 32K -f 4 -n 20000 -w 1000 -r mpi --blocking > $d/blocking.table
AB_A=blk AB_B=line $ab $d/async.txt 5 -- -b 8 -e 32K -f 4 -n 20000 -w 1000 -r mpi > $d/async.table
: > $d/others.txt
for i in 1 2 3; do
  for c in allgather broadcast alltoall reducescatter; do
    for mode in async blocking; do
      flag=; [ $mode = blocking ] && flag=--blocking
      LD_LIBRARY_PATH=/tmp/ab/line mpiexec.mpich -n 2 -bind-to core $perf --collective $c \
        -b 4K -e 64K -f 4 -n 5000 -w 200 -r mpi $flag 2>&1 | grep -v '^#' |
        awk -v c=$c -v m=$mode -v i=$i '{print c, m, i, $1, $6, $10, $12}' >> $d/others.txt
    done
  done
done
/usr/bin/python3 - $d/others.txt > $d/others.table <<'PY'
import collections, statistics, sys
d = collections.defaultdict(list)
for line in open(sys.argv[1]):
    c, m, i, size, t, ref, ratio = line.split()
    d[(c, int(size), m)].append((float(t), float(ratio)))
print("| collective | size | async: kolo us, MPI/kolo per round (median) | blocking: kolo us, MPI/kolo per round (median) |")
print("|---|---|---|---|")
for c, size in sorted({(k[0], k[1]) for k in d}):
    cells = []
    for m in ("async", "blocking"):
        rows = d[(c, size, m)]
        cells.append("%s; %s (%.2f)" % (" ".join("%.2f" % r[0] for r in rows),
                                         " ".join("%.2f" % r[1] for r in rows),
                                         statistics.median(r[1] for r in rows)))
    print(f"| {c} | {size} | {cells[0]} | {cells[1]} |")
PY
: > $d/np4.txt
for i in 1 2 3 4 5; do
  for mode in blocking async; do
    flag=; [ $mode = blocking ] && flag=--blocking
    echo "$mode $i $(LD_LIBRARY_PATH=/tmp/ab/line mpiexec.mpich -n 4 $perf -b 8 -e 8 -n 3000 -w 20 -r none $flag 2>&1 | grep -v '^#' | awk '{print $6}')" >> $d/np4.txt
  done
done
