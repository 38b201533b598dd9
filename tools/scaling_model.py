#!/usr/bin/python3
"""An alpha-beta cost model of kolo's allreduce paths, from N nodes x P ranks up to
1,024 ranks.

Two link classes, each a latency alpha (seconds per message) and an inverse
bandwidth beta (seconds per byte):
  shm  inside a node: kolo's shared-memory engine (reduction included in beta)
  net  between nodes: one NIC per node, shared by the node's ranks
Both are measured by kolo-allreduce-perf on the machine at hand (fit):
  net  from a run on 2 hosts x 1 rank, -t ring:  T(S) = 2 alpha + S beta
       (2(n-1) = 2 steps of S/2 bytes); with -r mpi the same rows give MPI's own
       alpha and beta (the `mpi` class: MPI_Allreduce has no coordinator)
  shm  from a run on 1 host x 2 ranks, -t shm:   T(S) = 2 alpha + S beta
  Two size classes per link (one alpha-beta line does not fit both: MPI's eager
  and rendezvous protocols, TCP's small writes and its streaming, kolo's one-shot
  and pipelined paths): alpha, for messages under LARGE_FROM bytes, is half the
  median time at 8 B to 4 KiB; alpha_large and beta are a least-squares line
  through the per-size medians of every size whose messages are LARGE_FROM or more
  (fit_large; fit_alpha_beta says why medians)
Predictions, for a message of S bytes on p = N P ranks (placed node by node):
  ring          2(p-1) steps of S/p bytes; with N > 1 every step waits for the
                hop that crosses to the next node (one flow per NIC per step):
                2(p-1) (a_net + S/p b_net); on one node the same over shm
  hierarchical  shm reduce-scatter and allgather inside each node, then P rings
                of N nodes, one per shard, sharing the NIC: each step puts S/N
                bytes on it: 2 a_shm + 2(P-1)/P S b_shm + 2(N-1) (a_net + S/N b_net)
                (no shm term for P = 1)
  mpi           MPICH's allreduce, node-aware on several nodes: reduce to one leader
                per node through shared memory, allreduce among the N leaders (one
                flow per NIC: recursive doubling under 2 KiB, log2 N steps of S
                bytes; Rabenseifner above, 2 log2 N steps and 2(N-1)/N S bytes),
                broadcast back: 2 (a_shm + S b_shm) more when P > 1
busbw = S/T * 2(p-1)/p (nccl-tests). A training step (a gradient profile from
bench/profiles, cut into fusion buckets of at most 64 MiB in order) costs the sum
of its buckets; scaling efficiency = compute / (compute + communication), with no
overlap of the two (a lower bound: Horovod overlaps them).

What it leaves out: see docs/scaling.md ("What the model leaves out").

Usage:
  scaling_model.py fit --net RUN... --shm RUN... [--json FILE]   (repeats pooled)
  scaling_model.py predict --params FILE|--alpha-net S --beta-net S/B ... --nodes N --ppn P
  scaling_model.py check --params FILE --measured CSV...   (rows of kolo-allreduce-perf)
  scaling_model.py efficiency --params FILE[=LABEL]... --profile bench/profiles/resnet50.txt
                   --compute-ms MS [--plot PNG]
"""
import argparse
import csv
import json
import math
import sys

SMALL_MPI_BYTES = 2048          # MPICH's MPIR_CVAR_ALLREDUCE_SHORT_MSG_SIZE
LARGE_FROM = 64 << 10           # messages of this size and up use a link's alpha_large
FUSION_BYTES = 64 << 20         # KOLO_FUSION_THRESHOLD's default
SIZES = [8 << (2 * k) for k in range(13)] + [256 << 20]   # 8 B, 32 B, ... 128 MiB, 256 MiB
CONFIGS = [(1, 2), (2, 1), (2, 2), (4, 4), (8, 4), (16, 4), (32, 4), (16, 8), (64, 8),
           (128, 8)]


# --- reading kolo-allreduce-perf output ----------------------------------------------

def read_rows(path):
    """Rows of kolo-allreduce-perf, from its --csv file or its printed table."""
    with open(path) as f:
        text = f.read()
    if text.startswith("size,"):
        return [dict(r) for r in csv.DictReader(text.splitlines())]
    rows = []
    for line in text.splitlines():
        words = line.split()
        if len(words) < 9 or line.lstrip().startswith("#") or not words[0].isdigit():
            continue
        row = {"size": words[0], "transport": words[4], "time_us": words[5],
               "busbw": words[7], "wrong": words[8]}
        if len(words) >= 12:
            row["ref_time_us"] = words[9]
        rows.append(row)
    return rows


def median(values):
    v = sorted(values)
    return v[len(v) // 2] if len(v) % 2 else (v[len(v) // 2 - 1] + v[len(v) // 2]) / 2


def fit_alpha_beta(points, steps):
    """alpha from the latency-bound sizes (<= 4 KiB: the median time / steps), beta
    from the most bandwidth-bound ones (the largest size measured, and any at least
    half as large: the median of (T - steps alpha) / S).
    Medians, not least squares: on a shared machine a few runs are slower by
    milliseconds whenever a rank waits for a core, and they would pull a fit."""
    small = [t for s, t in points if s <= 4096]
    biggest = max(s for s, _ in points)
    large = [(s, t) for s, t in points if s >= biggest / 2]
    alpha = median(small) / steps if small else 0.0
    beta = median([max(t - steps * alpha, 0.0) / s for s, t in large]) if large else 0.0
    return alpha, beta


def fit_large(points, steps):
    """alpha_large and beta of the large class: T = steps alpha_large + S beta, least
    squares through the median time of each size whose messages (S / steps) are
    LARGE_FROM or more. None when fewer than two such sizes were measured."""
    by_size = {}
    for s, t in points:
        if s / steps >= LARGE_FROM:
            by_size.setdefault(s, []).append(t)
    if len(by_size) < 2:
        return None
    xs = sorted(by_size)
    ys = [median(by_size[x]) for x in xs]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    beta = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    alpha_large = max((my - beta * mx) / steps, 0.0)
    return alpha_large, beta


def alpha_of(link, message_bytes):
    """The latency of one message of a link: alpha_large from LARGE_FROM bytes up
    (when the link has a large class), alpha below."""
    if "alpha_large" in link and message_bytes >= link.get("large_from", LARGE_FROM):
        return link["alpha_large"]
    return link["alpha"]


def fit(args):
    net = [r for path in args.net for r in read_rows(path)]
    shm = [r for path in args.shm for r in read_rows(path)]
    # 2 hosts x 1 rank and 1 host x 2 ranks: 2 steps of S/2 bytes each.
    net_points = [(float(r["size"]), float(r["time_us"]) * 1e-6) for r in net]
    mpi_points = [(float(r["size"]), float(r["ref_time_us"]) * 1e-6) for r in net
                  if "ref_time_us" in r]
    shm_points = [(float(r["size"]), float(r["time_us"]) * 1e-6) for r in shm]
    params = {}
    for name, points in (("net", net_points), ("mpi", mpi_points), ("shm", shm_points)):
        alpha, beta = fit_alpha_beta(points, 2)
        params[name] = {"alpha": alpha, "beta": beta}
        large = fit_large(points, 2)
        if large:
            params[name].update(alpha_large=large[0], beta=large[1], large_from=LARGE_FROM)
    text = json.dumps(params, indent=1)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text + "\n")
    print(text)
    for name, p in params.items():
        print("# %-3s alpha %9.2f us  alpha_large %9.2f us  beta %8.4f ns/B (%.3f GB/s)" %
              (name, p["alpha"] * 1e6, p.get("alpha_large", p["alpha"]) * 1e6,
               p["beta"] * 1e9, 1e-9 / p["beta"] if p["beta"] else float("inf")),
              file=sys.stderr)


def load_params(args):
    if args.params:
        with open(args.params) as f:
            return json.load(f)
    return {"net": {"alpha": args.alpha_net, "beta": args.beta_net},
            "mpi": {"alpha": args.alpha_mpi or args.alpha_net,
                    "beta": args.beta_mpi or args.beta_net},
            "shm": {"alpha": args.alpha_shm, "beta": args.beta_shm}}


# --- the model -------------------------------------------------------------------------

def ring_time(m, nodes, ppn, size):
    p = nodes * ppn
    if p == 1:
        return 0.0
    link = m["net"] if nodes > 1 else m["shm"]
    return 2 * (p - 1) * (alpha_of(link, size / p) + size / p * link["beta"])


def intra_time(m, ppn, size):
    """The shm engine's reduce-scatter plus allgather inside one node."""
    if ppn == 1:
        return 0.0
    s = m["shm"]
    return 2 * alpha_of(s, size / ppn) + 2 * (ppn - 1) / ppn * size * s["beta"]


def hierarchical_time(m, nodes, ppn, size):
    if nodes == 1:
        return intra_time(m, ppn, size)
    n = m["net"]
    cross = 2 * (nodes - 1) * (alpha_of(n, size / nodes) + size / nodes * n["beta"])
    return intra_time(m, ppn, size) + cross


def mpi_time(m, nodes, ppn, size):
    """MPICH's allreduce: node-aware on several nodes (reduce to a leader per node
    through shared memory, allreduce among the N leaders, broadcast back), so one
    flow per NIC; the leaders use recursive doubling under 2 KiB and Rabenseifner's
    recursive halving and doubling above."""
    if nodes * ppn == 1:
        return 0.0
    if nodes == 1:
        return intra_time(m, ppn, size)
    n, s = m["mpi"], m["shm"]
    steps = math.ceil(math.log2(nodes))
    if size < SMALL_MPI_BYTES:
        leaders = steps * (n["alpha"] + size * n["beta"])
    else:
        leaders = (2 * steps * alpha_of(n, size / 2) +
                   2 * (nodes - 1) / nodes * size * n["beta"])
    if ppn == 1:
        return leaders
    # The reduce and the broadcast inside the node: S through shared memory each.
    return leaders + 2 * (alpha_of(s, size) + size * s["beta"])


PATHS = {"ring": ring_time, "hierarchical": hierarchical_time, "mpi": mpi_time}


def busbw(size, time, ranks):
    return size / time * 2 * (ranks - 1) / ranks / 1e9 if time > 0 else float("inf")


def fmt_size(b):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if b >= 1 << shift and b % (1 << shift) == 0:
            return "%d %s" % (b >> shift, unit)
    return "%d B" % b


def predict(args):
    m = load_params(args)
    configs = [(args.nodes, args.ppn)] if args.nodes else CONFIGS
    for nodes, ppn in configs:
        p = nodes * ppn
        print("## %d nodes x %d ranks = %d ranks" % (nodes, ppn, p))
        print("| size | ring us | ring busbw | hierarchical us | hier busbw | mpi us | mpi busbw |")
        print("|---:|---:|---:|---:|---:|---:|---:|")
        for s in SIZES:
            t = {k: f(m, nodes, ppn, s) for k, f in PATHS.items()}
            print("| %s | %.1f | %.3f | %.1f | %.3f | %.1f | %.3f |" % (
                fmt_size(s), t["ring"] * 1e6, busbw(s, t["ring"], p),
                t["hierarchical"] * 1e6, busbw(s, t["hierarchical"], p),
                t["mpi"] * 1e6, busbw(s, t["mpi"], p)))
        print()


# --- the check against measurements -----------------------------------------------------

def check(args):
    """Each measured file: a kolo-allreduce-perf table from NODESxPPN, named
    <setting>_<N>x<P>_<transport>_<repeat>.txt (tools/scaling_runs.sh); repeats of
    one configuration are pooled: the error is the prediction's against their median,
    and the spread (min-max) is shown. Exit 1 if an error exceeds --tolerance."""
    m = load_params(args)
    groups = {}
    for path in args.measured:
        name = path.rsplit("/", 1)[-1].rsplit(".", 1)[0]
        parts = name.split("_")
        config = "_".join(parts[:-1]) if parts[-1].isdigit() else name
        nodes, ppn = (int(v) for v in next(w for w in parts if "x" in w and w[0].isdigit())
                      .split("x"))
        for r in read_rows(path):
            s = int(r["size"])
            if s < args.min_bytes:
                continue
            for label, key, model in ((r["transport"], "time_us", r["transport"]),
                                      ("MPI_Allreduce", "ref_time_us", "mpi")):
                if key in r and model in PATHS:
                    g = groups.setdefault((config, nodes, ppn, s, label, model), [])
                    g.append(float(r[key]) * 1e-6)
    worst = 0.0
    print("| configuration | size | path | runs | measured ms (median, min-max) | predicted ms | error |")
    print("|---|---:|---|---:|---:|---:|---:|")
    for (config, nodes, ppn, s, label, model), times in sorted(groups.items()):
        times.sort()
        med = times[len(times) // 2] if len(times) % 2 else (
            times[len(times) // 2 - 1] + times[len(times) // 2]) / 2
        pred = PATHS[model](m, nodes, ppn, s)
        err = (pred - med) / med
        worst = max(worst, abs(err))
        print("| %s | %s | %s | %d | %.1f (%.1f-%.1f) | %.1f | %+.0f %% |" % (
            config, fmt_size(s), label, len(times), med * 1e3, times[0] * 1e3, times[-1] * 1e3,
            pred * 1e3, err * 100))
    print("\nlargest error: %.0f %% (sizes from %s; tolerance %.0f %%)" % (
        worst * 100, fmt_size(args.min_bytes), args.tolerance * 100))
    return 0 if worst <= args.tolerance else 1


# --- a training step -------------------------------------------------------------------

def profile_buckets(path):
    sizes = []
    with open(path) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            sizes.append(int(line.split()[1]) * 4)   # float32 gradients
    buckets, current = [], 0
    for b in reversed(sizes):                      # backward order: last layer first
        if current and current + b > FUSION_BYTES:
            buckets.append(current)
            current = 0
        current += b
    buckets.append(current)
    return buckets


EFFICIENCY_CONFIGS = [(1, 1), (1, 4), (2, 4), (4, 4), (8, 4), (16, 4), (32, 4), (64, 4),
                      (128, 4), (256, 4)]


def efficiency(args):
    """A training step's communication and scaling efficiency for each parameter set
    (--params FILE[=LABEL], repeatable)."""
    buckets = profile_buckets(args.profile)
    compute = args.compute_ms * 1e-3
    curves = []
    for spec in args.params:
        path, _, label = spec.partition("=")
        with open(path) as f:
            m = json.load(f)
        label = label or path
        print("# %s; %s: %d buckets (%d bytes), compute %.0f ms per step, no overlap" % (
            label, args.profile, len(buckets), sum(buckets), args.compute_ms))
        print("| nodes x ranks | ranks | ring ms | hierarchical ms | mpi ms | efficiency (hierarchical) |")
        print("|---|---:|---:|---:|---:|---:|")
        curve = []
        for nodes, ppn in EFFICIENCY_CONFIGS:
            t = {k: sum(f(m, nodes, ppn, b) for b in buckets) for k, f in PATHS.items()}
            eff = compute / (compute + t["hierarchical"])
            curve.append((nodes * ppn, eff, compute / (compute + t["mpi"])))
            print("| %d x %d | %d | %.1f | %.1f | %.1f | %.0f %% |" % (
                nodes, ppn, nodes * ppn, t["ring"] * 1e3, t["hierarchical"] * 1e3,
                t["mpi"] * 1e3, eff * 100))
        print()
        curves.append((label, curve))
    if args.plot:
        plot(curves, args)


def plot(curves, args):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7.5, 4.4))
    for i, (label, curve) in enumerate(curves):
        color = "C%d" % i
        ranks = [c[0] for c in curve]
        ax.plot(ranks, [c[1] * 100 for c in curve], "o-", color=color,
                label=label + ": kolo hierarchical")
        ax.plot(ranks, [c[2] * 100 for c in curve], "s--", color=color, alpha=0.6,
                label=label + ": MPI_Allreduce")
    ax.axhspan(88, 90, xmin=0, xmax=1, color="tab:red", alpha=0.25,
               label="Horovod, published: 88-90 % at 128 GPUs\n(ResNet-101, Inception V3)")
    ax.axvline(128, color="tab:red", ls=":", lw=1)
    ax.set_xscale("log", base=2)
    ax.set_ylim(0, 105)
    ax.set_xlabel("GPUs (ranks), 4 per node")
    ax.set_ylabel("scaling efficiency, %")
    ax.set_title(args.title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower left", fontsize=7.5)
    fig.tight_layout()
    fig.savefig(args.plot, dpi=110)
    print("# wrote", args.plot)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("fit")
    f.add_argument("--net", required=True, nargs="+")
    f.add_argument("--shm", required=True, nargs="+")
    f.add_argument("--json")
    for name in ("predict", "check", "efficiency"):
        p = sub.add_parser(name)
        if name == "efficiency":
            p.add_argument("--params", action="append", required=True)
            continue
        p.add_argument("--params")
        for cls in ("net", "mpi", "shm"):
            p.add_argument("--alpha-" + cls, type=float, default=0.0)
            p.add_argument("--beta-" + cls, type=float, default=0.0)
    sub.choices["predict"].add_argument("--nodes", type=int)
    sub.choices["predict"].add_argument("--ppn", type=int, default=1)
    sub.choices["check"].add_argument("--measured", nargs="+", required=True)
    sub.choices["check"].add_argument("--min-bytes", type=int, default=0)
    sub.choices["check"].add_argument("--tolerance", type=float, default=0.25)
    e = sub.choices["efficiency"]
    e.add_argument("--profile", required=True)
    e.add_argument("--compute-ms", type=float, required=True)
    e.add_argument("--plot")
    e.add_argument("--title", default="ResNet-50, predicted scaling efficiency")
    args = ap.parse_args()
    return {"fit": fit, "predict": predict, "check": check, "efficiency": efficiency}[
        args.cmd](args) or 0


if __name__ == "__main__":
    sys.exit(main())
