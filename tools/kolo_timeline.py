#!/usr/bin/python3
"""Every rank's kolo timeline in one trace, and as a picture.

    kolo_timeline.py merge DIR_OR_FILES... -o merged.json
        One Chrome-trace file (Perfetto, chrome://tracing) with a process per rank
        from the per-rank files that KOLO_TIMELINE=<dir>/ or <path with %r> (or
        kolo_timeline_start) wrote, on one time axis (each file's kolo_clock event
        gives the wall-clock time of its ts 0). A file a crashed rank left without
        its closing ']' is read as far as it goes.

    kolo_timeline.py plot merged.json -o timeline.png [--from-ms A] [--to-ms B]
        Ranks x time (matplotlib): per rank, the time each tensor waited for the
        others (grey, one thin line per tensor), the buckets coloured by transport,
        and a red marker where the straggler (the rank that came last to a name)
        submitted it.

Exit status: 0, or 2 with a message for input that is not a kolo timeline.
"""

import argparse
import glob
import json
import os
import sys


class TimelineError(Exception):
    pass


def read_events(path):
    """The events of one rank's file (a JSON array, possibly without its end)."""
    with open(path) as f:
        text = f.read()
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        # A rank that died leaves "[ ... ,\n{...}" without the closing bracket.
        try:
            data = json.loads(text.rstrip().rstrip(",") + "\n]")
        except json.JSONDecodeError as e:
            raise TimelineError("%s: not a Chrome-trace JSON array (%s)" % (path, e))
    if isinstance(data, dict):
        data = data.get("traceEvents")
    if not isinstance(data, list):
        raise TimelineError("%s: not a Chrome-trace event list" % path)
    return data


def inputs_of(paths):
    files = []
    for p in paths:
        if os.path.isdir(p):
            files.extend(sorted(glob.glob(os.path.join(p, "kolo-timeline-rank*.json"))))
        else:
            files.append(p)
    if not files:
        raise TimelineError("no timeline files in %s" % ", ".join(paths))
    return files


def merge(paths):
    """The merged trace (a dict in Chrome's JSON object format)."""
    per_rank = {}
    for path in inputs_of(paths):
        events = read_events(path)
        clock = [e for e in events if e.get("ph") == "M" and e.get("name") == "kolo_clock"]
        if not clock:
            raise TimelineError("%s: no kolo_clock event (not a kolo timeline?)" % path)
        rank = clock[0]["args"]["rank"]
        if rank in per_rank:
            raise TimelineError("%s: rank %d again (also in %s)" % (path, rank, per_rank[rank][0]))
        per_rank[rank] = (path, clock[0]["args"]["unix_us_at_ts0"], events)
    origin = min(unix for _, unix, _ in per_rank.values())
    merged = []
    for rank in sorted(per_rank):
        _, unix, events = per_rank[rank]
        shift = unix - origin
        for e in events:
            e = dict(e)
            e["pid"] = rank
            if "ts" in e:
                e["ts"] = round(e["ts"] + shift, 3)
            merged.append(e)
    return {"traceEvents": merged, "displayTimeUnit": "ms",
            "otherData": {"kolo_ranks": sorted(per_rank), "unix_us_at_ts0": origin}}


def load_merged(path):
    with open(path) as f:
        data = json.load(f)
    if not isinstance(data, dict) or "traceEvents" not in data:
        raise TimelineError("%s: not a merged kolo timeline (run merge first)" % path)
    return data


# "shm+and": a small bucket reduced from copies that rode with the negotiation's
# AND (Note [Data rides with the AND] in src/core/negotiator.h).
TRANSPORT_COLOURS = {"shm": "tab:blue", "shm+and": "tab:cyan", "ring": "tab:orange",
                     "mpi": "tab:green",
                     "hierarchical": "tab:purple", "nccl": "tab:olive", "loopback": "tab:brown"}


def plot(data, out, from_ms=None, to_ms=None, title=None):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    ranks = data["otherData"]["kolo_ranks"]
    events = [e for e in data["traceEvents"] if e.get("ph") == "X"]
    lo = from_ms * 1000 if from_ms is not None else min((e["ts"] for e in events), default=0)
    hi = to_ms * 1000 if to_ms is not None else max((e["ts"] + e["dur"] for e in events),
                                                      default=1)
    events = [e for e in events if e["ts"] + e["dur"] >= lo and e["ts"] <= hi]
    fig, ax = plt.subplots(figsize=(10, 0.9 + 0.8 * len(ranks)), dpi=80)
    row = {r: i for i, r in enumerate(ranks)}
    seen = set()
    stragglers = []
    for e in events:
        y = row.get(e["pid"])
        if y is None:
            continue
        x0, w = (e["ts"] - lo) / 1000.0, e["dur"] / 1000.0
        if e.get("cat") == "bucket":
            t = e["args"].get("transport", "?")
            ax.broken_barh([(x0, max(w, 0.002))], (y - 0.38, 0.4),
                           facecolors=TRANSPORT_COLOURS.get(t, "tab:gray"), edgecolor="black",
                           linewidth=0.3)
            seen.add(t)
        elif e["name"] == "NEGOTIATE":
            ax.plot([x0, x0 + w], [y + 0.2, y + 0.2], color="0.4", alpha=0.25, linewidth=4,
                    solid_capstyle="butt")
            if e["args"].get("straggler") == e["pid"]:
                stragglers.append((x0, y + 0.2))
    if stragglers:
        xs, ys = zip(*stragglers)
        ax.scatter(xs, ys, marker="v", color="red", s=22, zorder=3)
    ax.set_yticks(range(len(ranks)))
    ax.set_yticklabels(["rank %d" % r for r in ranks])
    ax.set_ylim(len(ranks) - 0.4, -0.6)
    ax.set_xlim(0, (hi - lo) / 1000.0)
    ax.set_xlabel("ms")
    handles = [Patch(facecolor=TRANSPORT_COLOURS.get(t, "tab:gray"), label="bucket: " + t)
               for t in sorted(seen)]
    handles.append(Patch(facecolor="0.4", alpha=0.4, label="waiting for the others"))
    handles.append(plt.Line2D([], [], marker="v", color="red", linestyle="none",
                              label="straggler's submit"))
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.25 if len(ranks) < 3
                                                                  else -0.15),
              ncol=len(handles), fontsize=8, frameon=False)
    if title:
        ax.set_title(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    m = sub.add_parser("merge", help="one trace with a process per rank")
    m.add_argument("inputs", nargs="+", help="per-rank files, or the directory holding them")
    m.add_argument("-o", "--output", required=True)
    p = sub.add_parser("plot", help="draw a merged trace as a PNG")
    p.add_argument("merged")
    p.add_argument("-o", "--output", required=True)
    p.add_argument("--from-ms", type=float)
    p.add_argument("--to-ms", type=float)
    p.add_argument("--title")
    args = ap.parse_args(argv)
    try:
        if args.command == "merge":
            data = merge(args.inputs)
            with open(args.output, "w") as f:
                json.dump(data, f)
            print("%s: %d events from %d ranks" % (args.output, len(data["traceEvents"]),
                                                    len(data["otherData"]["kolo_ranks"])))
        else:
            plot(load_merged(args.merged), args.output, args.from_ms, args.to_ms, args.title)
            print(args.output)
    except (TimelineError, OSError, KeyError) as e:
        print("kolo_timeline: %s" % e, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
