#!/bin/bash
# Issue 33's rows besides the sweeps, 2026-11-29: the 64 MiB allreduce against
# the warm and cold two-thread ceilings (alone.sh, five rounds), then the
# ResNet-50 step from the heap and from kolo memory in place, three rounds.
# usage: final_rows.sh OUTDIR
out=$1; cd "$(dirname "$0")/../../.."
mkdir -p "$out"
docs/perf/ceiling_nov29/alone.sh "$out/ceiling.txt" 5
/usr/bin/python3 docs/perf/ceiling_nov29/table.py "$out/ceiling.txt" > "$out/ceiling_table.md"
: > "$out/resnet.txt"
docs/perf/resnet_rows.sh "$(realpath "$out")/resnet.txt" 3
