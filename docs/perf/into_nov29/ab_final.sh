#!/bin/bash
# The outputs the caller hands in, before (head: 852d755) and after (final) the
# change, alternating, 3 rounds each (docs/perf/kolo-memory.md, "2026-11-29:
# outputs the caller hands in"). Libraries under /tmp/ab/{head,final}.
# usage: docs/perf/into_nov29/ab_final.sh OUTDIR
out=$1; mkdir -p $out
ab() { AB_A=head AB_B=final docs/perf/kolo_memory_nov29/ab.sh $out/$1.txt 3 -- "${@:2}" > $out/$1.summary 2>&1; }
ab allreduce_kolo_c1 -b 1M -e 64M -f 4 -n 20 -w 3 -r mpi -c 1 --memory kolo
ab allreduce_heap_c1 -b 1M -e 64M -f 4 -n 20 -w 3 -r mpi -c 1
ab allreduce_kolo_c0 -b 4M -e 64M -f 2 -n 20 -w 3 -r mpi -c 0 --memory kolo
ab allreduce_kolo_inplace -b 4M -e 64M -f 4 -n 20 -w 3 -r mpi -c 1 --memory kolo --in-place
ab broadcast_kolo_c1 -b 4M -e 64M -f 2 -n 20 -w 3 -r mpi -c 1 --memory kolo --collective broadcast
ab broadcast_heap_c1 -b 4M -e 64M -f 2 -n 20 -w 3 -r mpi -c 1 --collective broadcast
ab broadcast_kolo_c0 -b 4M -e 64M -f 2 -n 20 -w 3 -r mpi -c 0 --memory kolo --collective broadcast
ab allgather_into_kolo_c1 -b 4M -e 64M -f 2 -n 20 -w 3 -r mpi -c 1 --memory kolo --collective allgather --blocking --into
