#!/usr/bin/python3
"""Every collective, kolo against MPI, over several runs: sweeps, a table, one plot each.

Usage:
  tools/perf_collectives.py run OUTDIR [--runs N] [--build DIR] [--np N] [--collectives ...]
                                      [--memory kolo] [--in-place] [--blocking] [--into]
  tools/perf_collectives.py report OUTDIR [--plots DIR] > table.md

`run` calls, for each run and each collective (allreduce first, then allgather,
broadcast, alltoall, reducescatter), one

  mpiexec.mpich -bind-to core -n NP BUILD/bin/kolo-allreduce-perf --collective X \
      -b B -e 256M -f 4 -r mpi --csv OUTDIR/X.RUN.csv

(B is 8 for allreduce, 4K for the others, as issue #15's targets; --memory kolo and
--blocking are passed on, --in-place to the allreduce only, --into to the allgather
only), so each row's
speedup (MPI time / kolo time) comes from kolo and MPI interleaved in one process
pair. Runs go round-robin over the collectives so that a change of the VM's phase
touches every collective alike; the load average before each sweep goes to
OUTDIR/uptime.txt. `report` reads the CSVs back: per collective and size, the median
and the min-max of the speedup over the runs, and (with --plots) a PNG per
collective of the median busbw of kolo and of MPI over sizes, with the min-max band
of each. Needs matplotlib for --plots (Debian: python3-matplotlib).

The VM moves its two vCPUs between cores that share a cache and cores far apart,
from one process start to the next (docs/perf/README.md, "Two machines in one"),
and every speedup depends on which. So before each sweep `run` also measures the
cache-line round trip between the two cores (BM_CoreRoundTrip of
BUILD/bin/memory_ceiling_bench, when built) into OUTDIR/<collective>.<run>.placement,
and `report --placement near|far` keeps only the sweeps that started near (round
trip under 150 ns; 52-135 ns seen) or far (313-453 ns seen). `run --start N`
numbers the runs from N, so that later runs add to a folder.
"""

import argparse
import csv
import glob
import os
import statistics
import subprocess
import sys
import re
import time

NEAR_NS = 150.0  # a round trip under this: the cores share a cache
COLLECTIVES = ["allreduce", "allgather", "broadcast", "alltoall", "reducescatter"]
GLIBC_TUNABLES = "glibc.malloc.mmap_threshold=1073741824:glibc.malloc.trim_threshold=2147483648"


def run(args):
    os.makedirs(args.outdir, exist_ok=True)
    env = dict(os.environ, GLIBC_TUNABLES=GLIBC_TUNABLES)
    perf = os.path.join(args.build, "bin", "kolo-allreduce-perf")
    if not os.access(perf, os.X_OK):
        sys.exit(f"perf_collectives.py: no {perf} (build the target kolo-allreduce-perf)")
    ceiling = os.path.join(args.build, "bin", "memory_ceiling_bench")
    for r in range(args.start, args.start + args.runs):
        for c in args.collectives:
            csv_path = os.path.join(args.outdir, f"{c}.{r}.csv")
            if os.access(ceiling, os.X_OK):
                with open(os.path.join(args.outdir, f"{c}.{r}.placement"), "w") as f:
                    f.write(f"{round_trip_ns(ceiling, env)}\n")
            cmd = ["mpiexec.mpich", "-bind-to", "core", "-n", str(args.np), perf,
                   "--collective", c, "-b", "8" if c == "allreduce" else "4K",
                   "-e", args.max, "-f", "4", "-r", "mpi", "--csv", csv_path,
                   "--memory", args.memory]
            if args.in_place and c == "allreduce":
                cmd.append("--in-place")
            if args.blocking:
                cmd.append("--blocking")
            if args.into and c == "allgather":
                cmd.append("--into")
            with open("/proc/loadavg") as f:
                load = " ".join(f.read().split()[:3])
            with open(os.path.join(args.outdir, "uptime.txt"), "a") as f:
                f.write(f"run {r} {c} {time.strftime('%H:%M:%S', time.gmtime())} UTC load {load}\n")
            with open(os.path.join(args.outdir, f"{c}.{r}.txt"), "w") as out:
                done = subprocess.run(cmd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                      timeout=600)
            if done.returncode != 0:
                sys.exit(f"perf_collectives.py: {' '.join(cmd)} exited {done.returncode}")


def round_trip_ns(ceiling, env):
    """The cache-line round trip between the first two cores, in ns (-1 if unread)."""
    done = subprocess.run(["mpiexec.mpich", "-n", "1", ceiling,
                           "--benchmark_filter=RoundTrip"], env=env, capture_output=True,
                          text=True, timeout=120)
    found = re.search(r"BM_CoreRoundTrip\S*\s+([0-9.]+) ns", done.stdout)
    return float(found.group(1)) if found else -1.0


def placement_of(csv_path):
    """'near', 'far' or 'unknown': the round trip measured before the sweep."""
    try:
        with open(csv_path[:-len(".csv")] + ".placement") as f:
            ns = float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return "unknown"
    return "unknown" if ns < 0 else "near" if ns < NEAR_NS else "far"


def read(outdir, placement="all"):
    """{collective: {size: [row, ...]}} from OUTDIR/<collective>.<run>.csv, keeping
    only the sweeps of `placement` unless it is 'all'."""
    table = {}
    for c in COLLECTIVES:
        for path in sorted(glob.glob(os.path.join(outdir, f"{c}.*.csv"))):
            if placement != "all" and placement_of(path) != placement:
                continue
            with open(path, newline="") as f:
                for row in csv.DictReader(f):
                    if int(row["wrong"]) != 0 or int(row.get("ref_wrong", 0) or 0) != 0:
                        sys.exit(f"{path}: wrong elements at size {row['size']}")
                    table.setdefault(c, {}).setdefault(int(row["size"]), []).append(row)
    return table


def human(size):
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if size >= 1 << shift and size % (1 << shift) == 0:
            return f"{size >> shift}{unit}"
    return f"{size}"


def spread(values):
    return statistics.median(values), min(values), max(values)


def report(args):
    table = read(args.outdir, args.placement)
    if not table:
        sys.exit(f"perf_collectives.py: no CSV in {args.outdir} (placement {args.placement})")
    for c, sizes in table.items():
        runs = max(len(v) for v in sizes.values())
        print(f"\n### {c} ({runs} runs)\n")
        print("| size | speedup median (min-max) | kolo us median | MPI us median |")
        print("|---|---|---|---|")
        for size in sorted(sizes):
            rows = sizes[size]
            sp = spread([float(r["speedup"]) for r in rows])
            t = statistics.median(float(r["time_us"]) for r in rows)
            ref = statistics.median(float(r["ref_time_us"]) for r in rows)
            print(f"| {human(size)} | {sp[0]:.2f} ({sp[1]:.2f}-{sp[2]:.2f}) | {t:.2f} | {ref:.2f} |")
        if args.plots:
            plot(c, sizes, os.path.join(args.plots, f"{c}_2ranks.png"))


def plot(collective, sizes, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    xs = sorted(sizes)
    fig, (ax, sp_ax) = plt.subplots(2, 1, figsize=(7, 6), sharex=True,
                                    gridspec_kw={"height_ratios": [2, 1]})
    for column, label, style in (("busbw", "kolo", "-"), ("ref_busbw", "MPI", "--")):
        med, lo, hi = zip(*(spread([float(r[column]) for r in sizes[x]]) for x in xs))
        ax.plot(xs, med, style, marker="o", markersize=3, label=f"{label} (median)")
        ax.fill_between(xs, lo, hi, alpha=0.2)
    med, lo, hi = zip(*(spread([float(r["speedup"]) for r in sizes[x]]) for x in xs))
    sp_ax.plot(xs, med, "-", marker="o", markersize=3, color="tab:green", label="median")
    sp_ax.fill_between(xs, lo, hi, alpha=0.2, color="tab:green")
    sp_ax.axhline(1.0, color="grey", linewidth=1)
    sp_ax.set_ylabel("MPI time / kolo time")
    sp_ax.set_yscale("log", base=2)
    ax.set_yscale("log")
    sp_ax.set_xscale("log", base=2)
    sp_ax.set_xticks(xs[::2])
    sp_ax.set_xticklabels([human(x) for x in xs[::2]])
    sp_ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("busbw (GB/s)")
    runs = max(len(v) for v in sizes.values())
    ax.set_title(f"{collective}, 2 ranks bound to cores: kolo vs MPI, {runs} runs (band: min-max)")
    for a in (ax, sp_ax):
        a.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="run the sweeps")
    r.add_argument("outdir")
    r.add_argument("--runs", type=int, default=5)
    r.add_argument("--start", type=int, default=1, help="number of the first run (default 1)")
    r.add_argument("--build", default="build")
    r.add_argument("--np", type=int, default=2)
    r.add_argument("--max", default="256M", help="largest size (default 256M)")
    r.add_argument("--collectives", nargs="+", default=COLLECTIVES, choices=COLLECTIVES)
    r.add_argument("--memory", choices=["heap", "kolo"], default="heap",
                   help="the buffers: heap (default) or kolo_alloc")
    r.add_argument("--in-place", action="store_true", help="allreduce in place")
    r.add_argument("--blocking", action="store_true",
                   help="kolo's blocking calls (kolo_allreduce, kolo_allgather, ...), "
                        "as MPI's are")
    r.add_argument("--into", action="store_true",
                   help="the allgather into a persistent buffer (kolo_allgather_into), "
                        "as MPI's")
    p = sub.add_parser("report", help="print the table, draw the plots")
    p.add_argument("outdir")
    p.add_argument("--plots", help="directory for one PNG per collective")
    p.add_argument("--placement", choices=["all", "near", "far"], default="all",
                   help="only the sweeps that started with the cores near or far apart")
    args = parser.parse_args()
    run(args) if args.command == "run" else report(args)


if __name__ == "__main__":
    main()
