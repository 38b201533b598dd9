#!/usr/bin/python3
"""Plot bus bandwidth against message size from kolo-allreduce-perf CSV files.

Usage:
  tools/plot_busbw.py -o busbw.png run_mpi.csv run_ring.csv run_auto.csv [--title T]

Each CSV is what `kolo-allreduce-perf --csv FILE` writes for a size sweep (columns
size, count, type, redop, transport, time_us, algbw, busbw, wrong, ref_time_us,
ref_busbw, speedup, nranks). One line is drawn per transport (the `transport`
column; a transport seen in several files is labelled with the file name too).
Files run with `-r mpi` also carry the MPI_Allreduce reference: its busbw is drawn
once, dashed, as the per-size median over those files (every run times it
interleaved with its own kolo iterations, so there is one measurement per file).

The x axis is the message size in bytes (log 2), the y axis busbw in GB/s
(GB = 1e9 bytes, busbw = algbw * 2(n-1)/n as in nccl-tests). Needs matplotlib
(Debian: python3-matplotlib); draws without a display (Agg backend).
"""

import argparse
import csv
import statistics
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)
from matplotlib.ticker import FuncFormatter  # noqa: E402


def read_rows(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    needed = {"size", "transport", "busbw"}
    if not rows or not needed <= set(rows[0]):
        sys.exit(f"{path}: not a kolo-allreduce-perf sweep CSV (needs columns {sorted(needed)})")
    return rows


def human_bytes(value, _pos=None):
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if value >= scale:
            return f"{value / scale:g}{unit}"
    return f"{value:g}"


def series(paths):
    """Returns ({label: [(size, busbw)]}, [(size, ref_busbw)] medians, nranks set, types)."""
    lines, reference, nranks, types = {}, {}, set(), set()
    seen = {}
    for path in paths:
        for row in read_rows(path):
            seen.setdefault(row["transport"], set()).add(path)
    for path in paths:
        for row in read_rows(path):
            transport = row["transport"]
            label = f"kolo, {transport}"
            if len(seen[transport]) > 1:
                label += f" ({path})"
            size = float(row["size"])
            lines.setdefault(label, []).append((size, float(row["busbw"])))
            if row.get("ref_busbw"):
                reference.setdefault(size, []).append(float(row["ref_busbw"]))
            if row.get("nranks"):
                nranks.add(row["nranks"])
            types.add(f"{row.get('type', '?')} {row.get('redop', '?')}")
    ref_line = sorted((s, statistics.median(v)) for s, v in reference.items())
    return lines, ref_line, nranks, types


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("csv", nargs="+", help="CSV files written by kolo-allreduce-perf --csv")
    parser.add_argument("-o", "--output", default="busbw.png", help="PNG to write")
    parser.add_argument("--title", default=None, help="plot title")
    args = parser.parse_args()

    lines, ref_line, nranks, types = series(args.csv)
    fig, ax = plt.subplots(figsize=(8, 5), dpi=120)
    for label, points in sorted(lines.items()):
        points.sort()
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", markersize=3,
                label=label)
    if ref_line:
        ax.plot([p[0] for p in ref_line], [p[1] for p in ref_line], "k--", marker="x",
                markersize=4, label="MPI_Allreduce (reference)")
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(FuncFormatter(human_bytes))
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("bus bandwidth (GB/s)")
    ranks = ", ".join(sorted(nranks)) or "?"
    ax.set_title(args.title or f"kolo allreduce busbw, {ranks} ranks, {', '.join(sorted(types))}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(args.output)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
