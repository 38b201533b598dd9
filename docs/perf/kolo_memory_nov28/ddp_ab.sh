#!/bin/bash
# A/B: DDP's communication against gloo with --kolo-memory, the library at 03903d5
# (base) against the new one, alternating. usage: ddp_ab.sh OUT PAIRS [--kolo-memory|""]
out=$1; pairs=${2:-3}; MEM=${3-"--kolo-memory"}; cd /work/main
: > $out
for i in $(seq 1 $pairs); do
  for b in base new; do
    echo "### pair $i $b $(date +%T) load $(cut -d' ' -f1 /proc/loadavg)" >> $out
    KOLO_LIBRARY=/tmp/ab/$b/lib/libkolo.so PYTHONPATH=$PWD/bindings/python OMP_NUM_THREADS=1 \
      timeout 300 mpiexec.mpich -n 2 -bind-to core /usr/bin/python3 bindings/python/examples/ddp_comm_bench.py --breakdown --repeats 3 $MEM 2>&1 | tail -6 >> $out
  done
done
