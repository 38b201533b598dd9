#!/bin/bash
# torch.distributed on backend "kolo", the Python package at 910490c (before:
# exported to /tmp/pyhead with `git archive 910490c bindings/python`) against the
# working tree's (after), alternating, ROUNDS rounds; the same libkolo.so.
# usage: docs/perf/c10d_nov29/runs.sh OUT ROUNDS
out=$1; rounds=$2; : > $out
for i in $(seq 1 $rounds); do
  for v in before after; do
    py=bindings/python; [ $v = before ] && py=/tmp/pyhead/bindings/python
    for s in all_gather.py small_calls.py; do
      echo "### $v $i $s" >> $out
      KOLO_LIBRARY=$PWD/build/lib/libkolo.so PYTHONPATH=$py timeout 600 mpiexec.mpich -n 2 -bind-to core /usr/bin/python3 \
        docs/perf/c10d_nov29/$s >> $out 2>&1
    done
  done
done
