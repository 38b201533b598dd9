#!/usr/bin/python3
"""Merge kolo flight recorder dumps and find where the ranks diverged.

usage: kolo_flight.py [--quiet] DUMP_OR_DIR...

Each rank writes kolo-flight-rank<R>.jsonl (KOLO_FLIGHT_RECORDER_DIR) on a stall,
when its control plane fails, and on SIGUSR1; the format is Note [Flight recorder
dump] in src/core/flight_recorder.h. Give the files, or the directories that hold
them. The tool prints a summary per rank, then the first operation number at
which the ranks' operations differ (every rank numbers its own submissions from
1, so #57 is the same operation everywhere when ranks submit the same sequence),
then the names that some ranks submitted and others did not.

Exit status: 0 when the dumps agree, 1 when they diverge, 2 when a dump cannot
be read. Python standard library only.
"""

import glob
import json
import os
import sys

DUMP_GLOB = "kolo-flight-rank*.jsonl"
UNFINISHED = ("submitted", "negotiated", "executing")


class DumpError(Exception):
    pass


def load_dump(path):
    """Returns (header, {seq: op}) from one rank's dump."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = [line for line in f if line.strip()]
    except OSError as e:
        raise DumpError(f"{path}: {e.strerror}")
    if not lines:
        raise DumpError(f"{path}: empty file")
    try:
        header = json.loads(lines[0])
        ops = [json.loads(line) for line in lines[1:]]
    except json.JSONDecodeError as e:
        raise DumpError(f"{path}: not a kolo flight recorder dump ({e})")
    if header.get("kolo_flight_recorder") != 1:
        raise DumpError(f"{path}: not a kolo flight recorder dump (no version-1 header line)")
    header["path"] = path
    return header, {op["seq"]: op for op in ops}


def find_dumps(args):
    paths = []
    for arg in args:
        if os.path.isdir(arg):
            found = sorted(glob.glob(os.path.join(arg, DUMP_GLOB)))
            if not found:
                raise DumpError(f"{arg}: no {DUMP_GLOB} files")
            paths += found
        else:
            paths.append(arg)
    return paths


def identity(op):
    """What must be equal across ranks for operation #n to be the same operation."""
    return (op["name"], op["name_hash"], op["kind"], op["bytes"], op["dtype"])


def describe(op, header):
    """'grad_x' (allreduce, 16 B float32, submitted 12.3 s before the dump)"""
    name = op["name"] + ("..." if op["name_length"] > len(op["name"]) else "")
    text = f"'{name}' ({op['kind']}, {op['bytes']} B {op['dtype']}, {op['state']}"
    if op["state"] in UNFINISHED and op.get("submitted") is not None:
        text += f" {header['time'] - op['submitted']:.1f} s before the dump"
    elif op["state"] == "failed":
        text += f": {op['status']}"
    return text + ")"


def rank_list(ranks):
    ranks = sorted(ranks)
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(str(r) for r in ranks)


def summary(rank, header, ops):
    states = {}
    for op in ops.values():
        states[op["state"]] = states.get(op["state"], 0) + 1
    counts = ", ".join(f"{s} {states[s]}" for s in
                       ("done", "failed", "executing", "negotiated", "submitted") if s in states)
    seqs = sorted(ops)
    span = f"#{seqs[0]}-#{seqs[-1]}" if seqs else "none"
    idle = header.get("idle_s")
    idle_text = "nothing submitted" if idle is None else f"idle {idle:.1f} s since its last submission"
    line = (f"rank {rank}: {header['recorded']} operations recorded, holding {span}"
            f" ({counts or 'empty'}); {idle_text}; dumped on {header['reason']!r}")
    unfinished = [ops[s] for s in seqs if ops[s]["state"] in UNFINISHED]
    if unfinished:
        line += f"\n  oldest unfinished: #{unfinished[0]['seq']} {describe(unfinished[0], header)}"
    return line


def first_divergence(dumps):
    """The first operation number at which the ranks differ, as text; None if none.

    Compares only numbers every dump still holds or has not reached yet: a rank
    whose ring dropped #n says nothing about #n.
    """
    start = max(min(ops) if ops else 1 for _, ops in dumps.values())
    end = max((max(ops) for _, ops in dumps.values() if ops), default=0)
    for seq in range(start, end + 1):
        by_identity = {}
        absent = []
        for rank, (header, ops) in dumps.items():
            op = ops.get(seq)
            if op is None:
                absent.append(rank)
            else:
                by_identity.setdefault(identity(op), []).append(rank)
        if len(by_identity) <= 1 and not absent:
            continue
        parts = []
        for ranks in sorted(by_identity.values(), key=lambda rs: (len(rs), min(rs))):
            header, ops = dumps[ranks[0]]
            parts.append(f"{rank_list(ranks)} submitted {describe(ops[seq], header)}")
        for rank in absent:
            parts.append(f"rank {rank} has not submitted it (its last is "
                         f"#{dumps[rank][0]['recorded']})")
        return f"first divergence at operation #{seq}: " + "; ".join(parts)
    return None


def only_on_some(dumps):
    """Names that some ranks submitted and others did not, within what all dumps hold."""
    start = max(min(ops) if ops else 1 for _, ops in dumps.values())
    seen = {}  # name -> {rank: op}
    for rank, (header, ops) in dumps.items():
        for seq, op in ops.items():
            if seq >= start:
                seen.setdefault(op["name"], {})[rank] = op
    lines = []
    for name, by_rank in sorted(seen.items(), key=lambda kv: min(op["seq"] for op in kv[1].values())):
        missing = [r for r in dumps if r not in by_rank]
        if not missing:
            continue
        have = ", ".join(f"{r} as #{op['seq']} {op['state']}" for r, op in sorted(by_rank.items()))
        lines.append(f"  '{name}': submitted by rank {have}; never by {rank_list(missing)}")
    return lines


def main(argv):
    quiet = "--quiet" in argv
    args = [a for a in argv if a != "--quiet"]
    if not args or any(a in ("-h", "--help") for a in args):
        print(__doc__.strip())
        return 0 if args else 2
    try:
        dumps = {}
        for path in find_dumps(args):
            header, ops = load_dump(path)
            if header["rank"] in dumps:
                raise DumpError(f"{path}: a second dump of rank {header['rank']} "
                                f"(also {dumps[header['rank']][0]['path']})")
            dumps[header["rank"]] = (header, ops)
    except DumpError as e:
        print(f"kolo_flight: {e}", file=sys.stderr)
        return 2
    dumps = dict(sorted(dumps.items()))
    sizes = {h["size"] for h, _ in dumps.values()}
    print(f"kolo flight recorder: {len(dumps)} dumps (ranks {', '.join(map(str, dumps))}"
          f" of a job of {', '.join(map(str, sorted(sizes)))})")
    if not quiet:
        for rank, (header, ops) in dumps.items():
            print(summary(rank, header, ops))
    diverged = first_divergence(dumps)
    print(diverged or "no divergence: every rank submitted the same operations in the same order")
    some = only_on_some(dumps)
    if some:
        print("names not submitted by every rank:")
        print("\n".join(some))
    missing_ranks = [r for r in range(max(sizes)) if r not in dumps] if len(sizes) == 1 else []
    if missing_ranks:
        print(f"no dump from {rank_list(missing_ranks)}")
    return 1 if diverged or some else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
