#!/bin/sh
# The rows of docs/perf/kolo-memory.md: kolo_alloc memory against heap buffers
# (the allreduce sweep, the deterministic path, the DDP step), interleaved.
cd "$(dirname "$0")/../../.."
out=docs/perf/kolo_memory_nov28
mkdir -p $out
export KOLO_LIBRARY=$PWD/build/lib/libkolo.so PYTHONPATH=$PWD/bindings/python OMP_NUM_THREADS=1 PYTHONDONTWRITEBYTECODE=1
for i in 1 2 3; do
  for m in heap kolo; do
    echo "== sweep $m $i load $(cut -d' ' -f1 /proc/loadavg)"
    mpiexec.mpich -n 2 -bind-to core build/bin/kolo-allreduce-perf -b 1M -e 256M -f 4 -n 20 -w 3 -r mpi --memory $m 2>&1 | grep -E "^ +[0-9]|Wrong"
  done
done > $out/sweep.txt 2>&1
for i in 1 2 3; do
  for m in heap kolo; do
    echo "== det $m $i load $(cut -d' ' -f1 /proc/loadavg)"
    mpiexec.mpich -n 2 -bind-to core build/bin/kolo-allreduce-perf -b 1M -e 64M -f 64 -n 20 -w 3 -r mpi --with-deterministic --memory $m 2>&1 | grep -E "^ +[0-9]|Wrong"
  done
done > $out/det.txt 2>&1
for i in 1 2 3; do
  for m in "" "--kolo-memory"; do
    echo "== ddp ${m:-heap} $i load $(cut -d' ' -f1 /proc/loadavg)"
    timeout 300 mpiexec.mpich -n 2 -bind-to core /usr/bin/python3 bindings/python/examples/ddp_comm_bench.py --breakdown --repeats 3 $m 2>&1 | tail -6
  done
done > $out/ddp.txt 2>&1
