#!/bin/bash
# Alternates two libraries through kolo-allreduce-perf, ROUNDS rounds: A and B
# are directories under /tmp/ab holding libkolo.so.0 (AB_A, default base:
# 5ff3629; AB_B, default new: the change measured). Prints size, then for each
# library kolo's us and MPI/kolo per round and the median.
# usage: [AB_A=x AB_B=y] ab.sh OUT ROUNDS -- perf args
out=$1; rounds=$2; shift 3
a=${AB_A:-base}; b=${AB_B:-new}
: > $out
for i in $(seq 1 $rounds); do for v in $a $b; do echo "### $v $i" >> $out; LD_LIBRARY_PATH=/tmp/ab/$v mpiexec.mpich -n 2 -bind-to core build/bin/kolo-allreduce-perf "$@" 2>&1 | grep -v "^#" | awk '{print $1, $6, $10, $12}' >> $out; done; done
/usr/bin/python3 - $out $a $b <<'PY'
import collections, sys, statistics
d=collections.defaultdict(list); v=None
for l in open(sys.argv[1]):
    if l.startswith('###'): v=l.split()[1]; continue
    f=l.split()
    if len(f)==4: d[(v,int(f[0]))].append((float(f[1]),float(f[3])))
for size in sorted({k[1] for k in d}):
    print(size, ' | '.join(f"{v}: kolo {' '.join('%.1f'%x[0] for x in d[(v,size)])} ratio {' '.join('%.2f'%x[1] for x in d[(v,size)])} (med {statistics.median(x[1] for x in d[(v,size)]):.2f})" for v in sys.argv[2:4]))
PY
