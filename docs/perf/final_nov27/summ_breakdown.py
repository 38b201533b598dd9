#!/usr/bin/python3
"""Table of breakdown_rows.txt (breakdown.sh): per collective, size and VM phase, the
median over runs of kolo's and MPI's time and of rank 0's phases. A run's phase is
that of its MPI 8 B allreduce: fast under 0.7 us, else slow."""
import re
import statistics
import sys
from collections import defaultdict

rows = defaultdict(list)  # (phase, collective, size) -> [(kolo, mpi, phases)]
coll, phase, last = None, None, None
for line in open(sys.argv[1]):
    m = re.match(r"## run (\d+) (\w+)", line)
    if m:
        coll = m.group(2)
        continue
    f = line.split()
    if f and f[0].isdigit():
        size = int(f[0])
        kolo, mpi = float(f[5]), float(f[9])
        if coll == "allreduce" and size == 8:
            phase = "fast" if mpi < 0.7 else "slow"
        last = (phase, coll, size, kolo, mpi)
        continue
    m = re.search(r"breakdown rank 0 \(median us\): (.*) \| total ([0-9.]+)", line)
    if m and last:
        p = dict((k, float(v)) for k, v in re.findall(r"(\w+) ([0-9.]+)", m.group(1)))
        p["total"] = float(m.group(2))
        ph, c, s, kolo, mpi = last
        rows[(ph, c, s)].append((kolo, mpi, p))

def size_name(b):
    return f"{b >> 10} KiB" if b >= 1024 else f"{b} B"

print("| phase | collective | size | runs | kolo us | MPI us | speedup | host: submit+to_cycle+to_transport+to_complete+wake | negotiate | transport | negotiate+transport |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
order = ["allreduce", "allgather", "broadcast", "alltoall", "reducescatter"]
for key in sorted(rows, key=lambda k: (k[0], order.index(k[1]), k[2])):
    ph, c, s = key
    v = rows[key]
    med = lambda xs: statistics.median(xs)
    kolo = med([x[0] for x in v]); mpi = med([x[1] for x in v])
    ph_med = lambda name: med([x[2][name] for x in v])
    host = sum(ph_med(n) for n in ["submit", "to_cycle", "to_transport", "to_complete", "wake"])
    neg, tr = ph_med("negotiate"), ph_med("transport")
    print(f"| {ph} | {c} | {size_name(s)} | {len(v)} | {kolo:.2f} | {mpi:.2f} | {mpi / kolo:.2f} | {host:.2f} | {neg:.2f} | {tr:.2f} | {neg + tr:.2f} |")
