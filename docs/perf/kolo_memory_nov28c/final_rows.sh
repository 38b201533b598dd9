#!/bin/bash
# Issue 33's closing rows besides the sweeps: the 64 MiB allreduce against the
# two-thread ceilings (kolo_memory_nov28b/ceiling_oop.sh, three runs), then the
# ResNet-50 step from the heap and from kolo memory in place, three rounds.
# usage: final_rows.sh OUTDIR
out=$1; cd "$(dirname "$0")/../../.."
mkdir -p "$out"
docs/perf/kolo_memory_nov28b/ceiling_oop.sh "$out/ceiling.txt" 3
: > "$out/resnet.txt"
docs/perf/resnet_rows.sh "$(realpath "$out")/resnet.txt" 3
