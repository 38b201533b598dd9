#!/usr/bin/env python3
"""Reads alone.sh's output: per run, kolo's 64 MiB time against the ceilings.

Share = the two-thread ceiling's time for one call / kolo's time. The ceiling's
Time is per thread, half a call (memory_ceiling_bench), so a call is twice it.
In place against BM_TwoThreadAllreduce for kolo alone (-r none) and against
BM_TwoThreadAllreduceCold for kolo with MPI's call between its own (-r mpi);
out of place against the faster of BM_TwoThreadAllreduceOutOfPlace's plain and
streaming rows (warm, both)."""
import re, sys, statistics

runs, cur = [], None
for line in open(sys.argv[1]):
    if line.startswith("### run"):
        m = re.match(r"### run (\d+) (ceilings|kolo memory -r (\w+) (.*?)) \d\d:", line)
        if m.group(2) == "ceilings":
            cur = {"ceil": {}, "kolo": {}}
            runs.append(cur)
            key = None
        else:
            key = (m.group(3), m.group(4).strip())
        continue
    if line.startswith("BM_"):
        name, t = line.split()[0], float(line.split()[1]) / 1e6
        cur["ceil"][name] = 2 * t
    elif key and line.strip():
        cur["kolo"][key] = float(line.split()[5]) / 1000
print("| run | ceiling in place ms (warm, cold) | out of place ms | " +
      " | ".join(f"-r {r} {m}" for r in ("none", "mpi") for m in ("--in-place", "-c 1", "-c 0")) + " |")
print("|---" * 9 + "|")
shares = {}
for i, r in enumerate(runs, 1):
    cin = r["ceil"]["BM_TwoThreadAllreduce/67108864/real_time/threads:2"]
    cold = r["ceil"].get("BM_TwoThreadAllreduceCold/67108864/real_time/threads:2")
    coop = min(v for k, v in r["ceil"].items() if "OutOfPlace" in k)
    cells = []
    for ref in ("none", "mpi"):
        for mode in ("--in-place", "-c 1", "-c 0"):
            t = r["kolo"][(ref, mode)]
            ref_in = cold if ref == "mpi" and cold else cin
            share = (ref_in if mode == "--in-place" else coop) / t
            shares.setdefault((ref, mode), []).append(share)
            cells.append(f"{t:.2f} ms {100 * share:.1f} %")
    print(f"| {i} | {cin:.2f}, {cold or float('nan'):.2f} | {coop:.2f} | " + " | ".join(cells) + " |")
print()
for k, v in shares.items():
    print(f"-r {k[0]} {k[1]}: median {100 * statistics.median(v):.1f} % "
          f"({', '.join(f'{100 * x:.1f}' for x in v)})")
