#!/usr/bin/python3
"""An alpha-beta cost model of kolo's allreduce paths, from N nodes x P ranks up to
1,024 ranks.

Link classes, each a latency alpha (seconds per message) and an inverse bandwidth
beta (seconds per byte), measured by kolo-allreduce-perf on the machine at hand (fit):
  net  a rank's exchange across the network (it sends and receives m bytes at once):
       kolo's ring on 2 hosts x 1 rank: 2 steps of S/2
  mpi  MPI_Allreduce's columns of the same run (-r mpi); its beta, which reaches
       the shaped rate there, is also the rate of a node's link (link_beta)
  shm  kolo's shared-memory engine, 1 host x 2 ranks: T(S) = 2 alpha + S beta
  Two size classes per link (one line does not fit both ends of a sweep): alpha,
  for messages under LARGE_FROM bytes, is half the median time at 8 B to 4 KiB;
  from LARGE_FROM up, alpha_large and beta (fit_large) and, for net and mpi, the
  measured steps themselves (Note [A line per size range]).
  os   oversubscribed: more ranks than cores. For K ranks on C cores, each path's
       run on 1 host x K ranks, T(S) = a + S b (fit_os): its scheduling waits and
       its node-local work. The model's input "machine" says how many cores the
       ranks have and whether every host's ranks share them (the pretend cluster:
       its hosts are namespaces of one machine) or each node has its own.
Predictions, for a message of S bytes on p = N P ranks (placed node by node):
  ring          2(p-1) steps of m = S/p bytes, each waiting for the hop that
                crosses to the next node: one flow per link each way per step, at
                the crossing rank's rate (Note [Which rate a crossing step runs at]):
                2(p-1) max(step_net(m), a_net + m b_link) for P = 1, 2(p-1)
                (a_net + m b_link) for P > 1; on one node the same over shm
  hierarchical  shm reduce-scatter and allgather inside each node (2 a_shm +
                2(P-1)/P S b_shm), then P rings of N nodes, one per shard: 2(N-1)
                steps, each rank moving S/(N P) each way at its own rate while its
                node's link carries S/N each way: max(step_net(S/(NP)), a_net +
                S/N b_link)
  mpi           MPICH 4.0.2's own selection (ch4, its compiled-in tuning): on several
                nodes node-aware ("composition alpha": reduce to one leader per node
                in shared memory, allreduce among the N leaders, broadcast back, 2
                (a_shm + S b_shm) when P > 1); the leaders use recursive doubling for
                8 B or less (log2 N steps of S) and recursive halving and doubling
                otherwise (steps of S/2, S/4, ..., S/N each way, twice)
  When ranks outnumber cores, each path adds its os run in place of its shm terms
  (MPI on several nodes: its measured composition, Note [MPI's composition on
  shared cores]).
busbw = S/T * 2(p-1)/p (nccl-tests). A training step (a gradient profile from
bench/profiles, cut into fusion buckets of at most 64 MiB in order) costs the sum
of its buckets; scaling efficiency = compute / (compute + communication), with no
overlap of the two (a lower bound: Horovod overlaps them).

Note [A line per size range]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~
kolo's exchange between two hosts is not one line: on the pretend cluster its steps
of 256 KiB, 1 MiB and 4 MiB ran at 11, 13 and 14 ns/B (1 Gbit/s) and 33, 49 and
55 ns/B (250 Mbit/s), and the line fitted to them (weighted by 1/T^2) missed the
2 x 1 rows by up to 29 % (128 KiB, 1 Gbit/s) and 30 % (8 MiB, 250 Mbit/s). So each
measured step (the per-size median) is kept, and a step between two measured
sizes costs the line through them: an alpha-beta per size range, measured, never
fitted to a configuration it then predicts.

Note [Which rate a crossing step runs at]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
A kolo rank that sends and receives across the network in the same step moves its
bytes at its own rate (net: 2 hosts x 1; 3 hosts x 1 agrees within 7-17 % at 1
Gbit/s), 55-58 % of the link's rate in steps of 4 MiB here, where MPI's own exchange
between the same two ranks runs within 3 % of it. With P > 1 the ring's crossing rank only sends (its receive comes through
shared memory) and its peer only receives; such a one-way flow is taken to run at
the link's rate, as MPI's does. That is an assumption of the model, not a
measurement of another configuration: no run here has a kolo rank that only
sends across, and the 2 x 2 ring rows are its test. The hierarchical path's ranks
do both, but P of them share a link: the slower bound holds.

Note [MPI's composition on shared cores]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
On the pretend cluster (all hosts' ranks on one machine's cores) MPICH's node-aware
allreduce at 2 x 2 is not the one-host run plus the leaders' exchange at 2 x 1's
rate: timed phase by phase (bench/mpi_phases.cc), the leaders' exchange takes
116-133 ms at 8 MiB and 1 Gbit/s against 72 ms on 2 x 1, while the non-leaders
busy-poll in the broadcast; reduce + bcast take 16-31 ms. So when the fit has them,
the composition is its two measured parts, each from a run that is not 2 x 2: the
node leader's reduce + bcast on 1 host x K ranks split into pretend nodes
(os[K].mpi_node, a + S b), and the leaders' MPI_Allreduce on 2 x 1 beside K - 2
MPI ranks busy-polling in MPI_Bcast (os[K].mpi_leaders, a link class). It is the
cores' share, not MPI: 2 x 1 beside two busy loops each in a session of its own
took 115-116 ms, the same loops in one session (one scheduler autogroup) 73-77 ms;
every MPI rank is a session of its own.

What it leaves out: see docs/scaling.md ("What the model leaves out").

Usage:
  scaling_model.py fit --net RUN... --shm RUN... [--os RUN...] [--cores C] [--own-cores]
                   [--mpi-node PHASES... --mpi-busy PHASES... [--busy-ranks K]]
                   [--json FILE]   (repeats pooled)
  scaling_model.py phases PHASES... [--min-bytes B]   (kolo-mpi-phases runs, a table)
  scaling_model.py predict --params FILE|--alpha-net S --beta-net S/B ... --nodes N --ppn P
                   [--cores-per-node C]
  scaling_model.py check --params FILE --measured RUN... [--min-bytes B]
  scaling_model.py efficiency --params FILE[=LABEL]... --profile bench/profiles/resnet50.txt
                   --compute-ms MS [--plot PNG] [--cores-per-node C]
"""
import argparse
import csv
import json
import math
import os
import re
import sys

SMALL_MPI_BYTES = 8             # MPICH 4.0.2's built-in selection: "avg_msg_size<=8"
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


def read_phases(path):
    """Rows of kolo-mpi-phases (bench/mpi_phases.cc), times in seconds: size, and
    per row "leaders_node" (each node leader's reduce + bcast medians), "leaders"
    (each node leader's leaders' allreduce median), "composed" and "whole" (the
    slowest rank's medians). A node's leader is node rank 0: ranks r with r % G == 0
    for --node-size G, or for MPI's nodes r % (ranks / nodes) == 0 (node by node)."""
    rows, ranks, group = [], 0, 1
    with open(path) as f:
        for line in f:
            words = line.split()
            if line.startswith("# kolo-mpi-phases:"):
                ranks, nodes = int(words[2]), int(words[4])
                group = int(words[7].rstrip("),")) if "--node-size" in line else ranks // nodes
                continue
            if not words or line.startswith("#") or not words[0].isdigit():
                continue
            v = [float(w) * 1e-3 for w in words[1:3 * ranks + 3]]
            reduce, lead, bcast = v[:ranks], v[ranks:2 * ranks], v[2 * ranks:3 * ranks]
            leaders = range(0, ranks, group)
            rows.append({"size": int(words[0]),
                         "leaders_node": [reduce[r] + bcast[r] for r in leaders],
                         "leaders": [lead[r] for r in leaders],
                         "composed": v[3 * ranks], "whole": v[3 * ranks + 1]})
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


def large_sizes(points, steps):
    """[(size, [times])], ascending, of the sizes whose messages (S / steps) are
    LARGE_FROM or more; None when fewer than two such sizes were measured."""
    by_size = {}
    for s, t in points:
        if s / steps >= LARGE_FROM:
            by_size.setdefault(s, []).append(t)
    return sorted(by_size.items()) if len(by_size) >= 2 else None


def fit_large(points, steps):
    """alpha_large and beta of the large class: T = steps alpha_large + S beta
    through the median time of each size whose messages (S / steps) are LARGE_FROM
    or more, minimising the squared relative error (weights 1 / T^2: the check
    judges relative errors, and an unweighted line follows the largest size and
    misses the smallest by 30 %); with alpha_large >= 0 (refitted through 0 when
    the line's intercept would be negative). None when fewer than two such sizes
    were measured."""
    by_size = {}
    for s, t in points:
        if s / steps >= LARGE_FROM:
            by_size.setdefault(s, []).append(t)
    if len(by_size) < 2:
        return None
    pts = [(x, median(ts)) for x, ts in sorted(by_size.items())]
    # Weighted least squares of y = c + x beta, weights w = 1 / y^2.
    w = [1 / y ** 2 for _, y in pts]
    sw = sum(w)
    mx = sum(wi * x for wi, (x, _) in zip(w, pts)) / sw
    my = sum(wi * y for wi, (_, y) in zip(w, pts)) / sw
    beta = (sum(wi * (x - mx) * (y - my) for wi, (x, y) in zip(w, pts)) /
            sum(wi * (x - mx) ** 2 for wi, (x, _) in zip(w, pts)))
    c = my - beta * mx
    if c < 0:   # through the origin: minimise sum ((x beta - y) / y)^2
        c = 0.0
        beta = sum(x / y for x, y in pts) / sum((x / y) ** 2 for x, y in pts)
    return c / steps, beta


def alpha_of(link, message_bytes):
    """The latency of one message of a link: alpha_large from LARGE_FROM bytes up
    (when the link has a large class), alpha below."""
    if "alpha_large" in link and message_bytes >= link.get("large_from", LARGE_FROM):
        return link["alpha_large"]
    return link["alpha"]


def fit_steps(points, steps):
    """The large class's measured steps: [message bytes, time of one step] at the
    per-size median of every size whose messages are LARGE_FROM or more (step_time
    draws the line between neighbours). None below two sizes."""
    by_size = large_sizes(points, steps)
    if by_size is None:
        return None
    return [[s / steps, median(ts) / steps] for s, ts in by_size]


def step_time(link, m):
    """One step of a link's exchange of m bytes each way: with measured steps
    (Note [A line per size range]) the line through the two measured steps around
    m (the last two above them); below them, or without them, alpha(m) + m beta."""
    pts = link.get("steps")
    if not pts or m < pts[0][0]:
        return alpha_of(link, m) + m * link["beta"]
    i = next((k for k in range(1, len(pts)) if m <= pts[k][0]), len(pts) - 1)
    (m0, t0), (m1, t1) = pts[i - 1], pts[i]
    return t0 + (m - m0) * (t1 - t0) / (m1 - m0)


def fit_os(points):
    """The oversubscribed class of one path: T(S) = a + S b, from a run on one host
    with more ranks than cores. a: the median time of every size up to 32 KiB (the
    scheduling waits, which dominate there and vary by 2-4x between sizes, so many
    points and a median); b: the median of (T - a) / S over the per-size medians of
    512 KiB and up (0 if negative)."""
    small = [t for s, t in points if s <= 32 << 10]
    by_size = {}
    for s, t in points:
        if s >= 512 << 10:
            by_size.setdefault(s, []).append(t)
    a = median(small) if small else 0.0
    b = median([max(median(ts) - a, 0.0) / s for s, ts in by_size.items()]) if by_size else 0.0
    return {"a": a, "b": b}


def ranks_of(path):
    """N x P from a run's file name (<setting>_<N>x<P>[what]_<transport>_<repeat>.txt)."""
    name = path.rsplit("/", 1)[-1]
    word = next(w for w in name.split("_") if re.match(r"\d+x\d+", w))
    nodes, ppn = (int(v) for v in re.match(r"(\d+)x(\d+)", word).groups())
    return nodes, ppn


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
        if name != "shm" and fit_steps(points, 2):
            params[name]["steps"] = fit_steps(points, 2)
    # One host x K ranks on fewer cores: each kolo transport's rows and MPI's.
    over = {}
    for path in args.os or []:
        nodes, ppn = ranks_of(path)
        cls = over.setdefault(str(nodes * ppn), {})
        for r in read_rows(path):
            t, s = r["transport"], float(r["size"])
            cls.setdefault(t, []).append((s, float(r["time_us"]) * 1e-6))
            if "ref_time_us" in r:
                cls.setdefault("mpi", []).append((s, float(r["ref_time_us"]) * 1e-6))
    if over:
        params["os"] = {k: {path: fit_os(pts) for path, pts in v.items()} for k, v in over.items()}
    fit_composition(args, params)
    params["machine"] = {"cores": args.cores, "hosts_share_cores": not args.own_cores}
    text = json.dumps(params, indent=1)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text + "\n")
    print(text)
    for name in ("net", "mpi", "shm"):
        p = params[name]
        print("# %-3s alpha %9.2f us  alpha_large %9.2f us  beta %8.4f ns/B (%.3f GB/s)" %
              (name, p["alpha"] * 1e6, p.get("alpha_large", p["alpha"]) * 1e6,
               p["beta"] * 1e9, 1e-9 / p["beta"] if p["beta"] else float("inf")),
              file=sys.stderr)
    for k, cls in sorted(params.get("os", {}).items()):
        for path, c in sorted(cls.items()):
            if "a" not in c:   # mpi_leaders: a link class
                print("# os %s ranks on %d cores, %-12s steps %s ms" % (
                    k, args.cores, path, ", ".join("%d KiB: %.2f" % (m / 1024, t * 1e3)
                                                   for m, t in c.get("steps", []))),
                      file=sys.stderr)
                continue
            print("# os %s ranks on %d cores, %-12s a %8.2f ms  b %7.4f ns/B" % (
                k, args.cores, path, c["a"] * 1e3, c["b"] * 1e9), file=sys.stderr)


def fit_composition(args, params):
    """MPI's node-aware allreduce on shared cores (Note [MPI's composition on shared
    cores]), from kolo-mpi-phases runs that are not the configuration it predicts:
    os[K].mpi_node, the node leader's reduce + bcast on 1 host x K ranks split into
    pretend nodes (fit_os), and os[K].mpi_leaders, a 2-rank MPI_Allreduce across
    the network beside K - 2 busy-polling MPI ranks (a link class, as mpi: 2 steps of
    S/2; both loops of the run, each the slowest rank's median)."""
    if not (args.mpi_node or args.mpi_busy):
        return
    if not (args.mpi_node and args.mpi_busy):
        raise ModelError("--mpi-node and --mpi-busy come together (MPI's composition "
                         "needs both its node phases and its leaders' exchange)")
    node, busy = {}, []
    for path in args.mpi_node:
        nodes, ppn = ranks_of(path)
        for r in read_phases(path):
            node.setdefault(str(nodes * ppn), []).extend((r["size"], t) for t in r["leaders_node"])
    for path in args.mpi_busy:
        busy.extend((r["size"], t) for r in read_phases(path) for t in (r["composed"], r["whole"]))
    k = str(args.busy_ranks)
    if list(node) != [k]:
        raise ModelError("--mpi-node runs must be on 1 host x %s ranks (--busy-ranks), not %s"
                         % (k, ", ".join(sorted(node))))
    alpha, beta = fit_alpha_beta(busy, 2)
    leaders = {"alpha": alpha, "beta": beta}
    large = fit_large(busy, 2)
    if large:
        leaders.update(alpha_large=large[0], beta=large[1], large_from=LARGE_FROM)
    if fit_steps(busy, 2):
        leaders["steps"] = fit_steps(busy, 2)
    cls = params.setdefault("os", {}).setdefault(k, {})
    cls["mpi_node"] = fit_os(node[k])
    cls["mpi_leaders"] = leaders


def for_cluster(m, cores_per_node):
    """The parameters for predictions on a real cluster: each node has its own
    cores (cores_per_node; None: as many as it has ranks), whatever machine they
    were measured on."""
    m = dict(m)
    m.pop("machine", None)
    if cores_per_node:
        m["machine"] = {"cores": cores_per_node, "hosts_share_cores": False}
    return m


def load_params(args):
    if args.params:
        with open(args.params) as f:
            return json.load(f)
    return {"net": {"alpha": args.alpha_net, "beta": args.beta_net},
            "mpi": {"alpha": args.alpha_mpi or args.alpha_net,
                    "beta": args.beta_mpi or args.beta_net},
            "shm": {"alpha": args.alpha_shm, "beta": args.beta_shm}}


# --- the model -------------------------------------------------------------------------

class ModelError(Exception):
    """A prediction the parameters cannot make (e.g. no oversubscribed class)."""


def link_beta(m):
    """The inverse rate of one node's link: MPI's own beta on 2 hosts x 1 rank (the
    `mpi` class), which reaches the shaped rate there; 'link' overrides it."""
    return m.get("link", {}).get("beta", m["mpi"]["beta"])


def os_class(m, nodes, ppn):
    """The oversubscribed class for N x P, or None when every rank has a core.
    m["machine"] = {"cores": C, "hosts_share_cores": bool}: on the pretend cluster
    every host's ranks share one machine's C cores (so N P ranks count), on a real
    cluster a node's P ranks share its own. No "machine": every rank has a core."""
    mach = m.get("machine")
    if not mach:
        return None
    k = nodes * ppn if mach.get("hosts_share_cores") else ppn
    if k <= mach["cores"]:
        return None
    cls = m.get("os", {}).get(str(k))
    if cls is None:
        raise ModelError("%d ranks share %d cores and the parameters have no oversubscribed "
                         "class for %d ranks: fit --os with a run on 1 host x %d ranks"
                         % (k, mach["cores"], k, k))
    return cls


def os_time(cls, path, size):
    """The one-host run of the same path at the same ranks on the same cores:
    a + S b (fit_os)."""
    c = cls[path]
    return c["a"] + size * c["b"]


def ring_time(m, nodes, ppn, size):
    p = nodes * ppn
    if p == 1:
        return 0.0
    over = os_class(m, nodes, ppn)
    if nodes == 1:
        if over:
            return os_time(over, "ring", size)
        s = m["shm"]
        return 2 * (p - 1) * (alpha_of(s, size / p) + size / p * s["beta"])
    n, msg = m["net"], size / p
    # Note [Which rate a crossing step runs at]: with one rank per node each rank
    # sends to the next node and receives from the previous one at once, at its own
    # rate (net); with several, the crossing rank only sends or only receives: the
    # link's rate.
    link = alpha_of(n, msg) + msg * link_beta(m)
    step = max(step_time(n, msg), link) if ppn == 1 else link
    cross = 2 * (p - 1) * step
    return cross + (os_time(over, "ring", size) if over else 0.0)


def intra_time(m, ppn, size):
    """The shm engine's reduce-scatter plus allgather inside one node."""
    if ppn == 1:
        return 0.0
    s = m["shm"]
    return 2 * alpha_of(s, size / ppn) + 2 * (ppn - 1) / ppn * size * s["beta"]


def hierarchical_time(m, nodes, ppn, size):
    over = os_class(m, nodes, ppn)
    intra = os_time(over, "shm", size) if over else intra_time(m, ppn, size)
    if nodes == 1:
        return intra
    # P rings of N nodes, one per shard: each rank sends and receives S/(N P) per
    # step (at its own rate), its node's link carries S/N each way (the link's).
    n, msg = m["net"], size / (nodes * ppn)
    step = max(step_time(n, msg), alpha_of(n, msg) + size / nodes * link_beta(m))
    return intra + 2 * (nodes - 1) * step


def leaders_time(n, nodes, size):
    """MPICH's MPIR allreduce among N ranks, one per node (its built-in selection:
    recursive doubling for 8 B or fewer, or fewer float32 elements than the largest
    power of two <= N; reduce-scatter + allgather otherwise, with the ranks beyond
    that power of two folded in first and sent the result last)."""
    pof2 = 1 << (nodes.bit_length() - 1)
    steps = math.ceil(math.log2(nodes))
    if size <= SMALL_MPI_BYTES or size / 4 < pof2:
        return steps * step_time(n, size)
    fold = 0.0 if pof2 == nodes else 2 * step_time(n, size)
    k = int(math.log2(pof2))
    # Recursive halving, then doubling: steps of S/2, S/4, ..., S/pof2 each way.
    return fold + 2 * sum(step_time(n, size / 2 ** j) for j in range(1, k + 1))


def mpi_time(m, nodes, ppn, size):
    """MPI_Allreduce as MPICH 4.0.2 (ch4) selects it: on one node its shared-memory
    allreduce; on several, node-aware (composition alpha: reduce to a leader per
    node in shared memory, allreduce among the leaders, broadcast back)."""
    if nodes * ppn == 1:
        return 0.0
    over = os_class(m, nodes, ppn)
    if over and nodes > 1 and ppn > 1 and "mpi_node" in over:
        # Note [MPI's composition on shared cores]
        return os_time(over, "mpi_node", size) + leaders_time(over["mpi_leaders"], nodes, size)
    if over:
        intra = os_time(over, "mpi", size)
    elif ppn > 1:
        s = m["shm"]
        intra = 2 * (alpha_of(s, size) + size * s["beta"])
    else:
        intra = 0.0
    if nodes == 1:
        return intra if over else intra_time(m, ppn, size)
    return leaders_time(m["mpi"], nodes, size) + intra


PATHS = {"ring": ring_time, "hierarchical": hierarchical_time, "mpi": mpi_time}


def busbw(size, time, ranks):
    return size / time * 2 * (ranks - 1) / ranks / 1e9 if time > 0 else float("inf")


def fmt_size(b):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if b >= 1 << shift and b % (1 << shift) == 0:
            return "%d %s" % (b >> shift, unit)
    return "%d B" % b


def predict(args):
    m = for_cluster(load_params(args), args.cores_per_node)
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
        nodes, ppn = ranks_of(path)
        for r in read_rows(path):
            s = int(r["size"])
            if s < args.min_bytes:
                continue
            kolo = args.auto if r["transport"] == "auto" and args.auto else r["transport"]
            for label, key, model in ((r["transport"], "time_us", kolo),
                                      ("MPI_Allreduce", "ref_time_us", "mpi")):
                if key in r and model in PATHS:
                    g = groups.setdefault((config, nodes, ppn, s, label, model), [])
                    g.append(float(r[key]) * 1e-6)
    worst, within = 0.0, 0
    print("| configuration | size | path | runs | measured ms (median, min-max) | predicted ms | error |")
    print("|---|---:|---|---:|---:|---:|---:|")
    for (config, nodes, ppn, s, label, model), times in sorted(groups.items()):
        times.sort()
        med = times[len(times) // 2] if len(times) % 2 else (
            times[len(times) // 2 - 1] + times[len(times) // 2]) / 2
        pred = PATHS[model](m, nodes, ppn, s)
        err = (pred - med) / med
        worst = max(worst, abs(err))
        within += abs(err) <= args.tolerance
        print("| %s | %s | %s | %d | %.1f (%.1f-%.1f) | %.1f | %+.0f %% |" % (
            config, fmt_size(s), label, len(times), med * 1e3, times[0] * 1e3, times[-1] * 1e3,
            pred * 1e3, err * 100))
    print("\nlargest error: %.0f %%; %d of %d rows within %.0f %% (sizes from %s)" % (
        worst * 100, within, len(groups), args.tolerance * 100, fmt_size(args.min_bytes)))
    return 0 if worst <= args.tolerance else 1


def phases(args):
    """A table of kolo-mpi-phases runs (read_phases) from --min-bytes up: per run and
    size, the node leaders' reduce + bcast and leaders' allreduce (each leader's
    median; min-max over the leaders), the slowest rank's composition and whole
    MPI_Allreduce, in ms."""
    print("| run | size | leaders' reduce + bcast ms | leaders' allreduce ms | composed ms | MPI_Allreduce ms |")
    print("|---|---:|---:|---:|---:|---:|")
    for path in args.runs:
        name = path.rsplit("/", 1)[-1].rsplit(".", 1)[0]
        for r in read_phases(path):
            if r["size"] < args.min_bytes:
                continue
            node, lead = sorted(r["leaders_node"]), sorted(r["leaders"])
            print("| %s | %s | %.1f-%.1f | %.1f-%.1f | %.1f | %.1f |" % (
                name, fmt_size(r["size"]), node[0] * 1e3, node[-1] * 1e3, lead[0] * 1e3,
                lead[-1] * 1e3, r["composed"] * 1e3, r["whole"] * 1e3))


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
            m = for_cluster(json.load(f), args.cores_per_node)
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
    f.add_argument("--os", nargs="+", help="runs on 1 host x K ranks, K > --cores")
    f.add_argument("--cores", type=int, default=os.cpu_count(),
                   help="cores the runs' ranks shared (default: this machine's)")
    f.add_argument("--own-cores", action="store_true",
                   help="each host had its own cores (not the pretend cluster)")
    f.add_argument("--mpi-node", nargs="+",
                   help="kolo-mpi-phases on 1 host x K ranks as pretend nodes (--node-size)")
    f.add_argument("--mpi-busy", nargs="+",
                   help="kolo-mpi-phases on 2 hosts x 1 rank beside K - 2 busy-polling MPI ranks")
    f.add_argument("--busy-ranks", type=int, default=4,
                   help="K: the ranks sharing the cores in the --mpi-node/--mpi-busy runs")
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
    sub.choices["check"].add_argument(
        "--auto", choices=sorted(PATHS),
        help="the path transport 'auto' took (KOLO_LOG_LEVEL=debug says), to predict its rows")
    for name in ("predict", "efficiency"):
        sub.choices[name].add_argument(
            "--cores-per-node", type=int,
            help="cores of each node (default: at least one per rank)")
    ph = sub.add_parser("phases")
    ph.add_argument("runs", nargs="+")
    ph.add_argument("--min-bytes", type=int, default=131072)
    e = sub.choices["efficiency"]
    e.add_argument("--profile", required=True)
    e.add_argument("--compute-ms", type=float, required=True)
    e.add_argument("--plot")
    e.add_argument("--title", default="ResNet-50, predicted scaling efficiency")
    args = ap.parse_args()
    try:
        return {"fit": fit, "predict": predict, "check": check, "efficiency": efficiency,
                "phases": phases}[
            args.cmd](args) or 0
    except ModelError as e:
        print("scaling_model.py: %s" % e, file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
