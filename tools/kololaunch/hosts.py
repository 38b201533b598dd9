"""Where the ranks go: host lists (-H), hostfiles, each batch scheduler's allocation
(LSF, Slurm, PBS) and block placement of ranks on their slots. Pure functions of
their inputs (text, an environment dict), each tested on its own in
tests/kolorun/kolorun_test.py."""

import re

from .common import UsageError, positive_int

MAX_HOSTS = 100000  # a bracket range past this is a typo, not a cluster

# A host list is a list of (name, slots) pairs in placement order, names unique.

HOST_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*\Z")
HOST_FORMAT = "expected NAME or NAME:SLOTS (SLOTS a positive integer), separated by commas"


def merge_hosts(pairs):
    """Adds up the slots of a host named more than once; keeps first-seen order."""
    merged = {}
    for name, slots in pairs:
        merged[name] = merged.get(name, 0) + slots
    return list(merged.items())


def parse_host_list(text, what="-H"):
    """'a:4,b:4' -> [('a', 4), ('b', 4)]; a bare NAME has one slot."""
    pairs = []
    for item in text.split(","):
        name, sep, slots_text = item.strip().partition(":")
        slots = positive_int(slots_text) if sep else 1
        if not HOST_NAME.match(name) or slots is None:
            raise UsageError(f"{what}: {item.strip()!r} is not a host: {HOST_FORMAT}")
        pairs.append((name, slots))
    return merge_hosts(pairs)


def parse_hostfile(lines, path):
    """'HOST slots=N' lines (or HOST, HOST:N); '#' starts a comment; blank lines skipped."""
    pairs = []
    for number, raw in enumerate(lines, 1):
        words = raw.split("#", 1)[0].split()
        if not words:
            continue
        name, sep, slots_text = words[0].partition(":")
        slots = positive_int(slots_text) if sep else 1
        for word in words[1:]:
            key, _, value = word.partition("=")
            slots = positive_int(value) if key == "slots" and not sep else None
        if not HOST_NAME.match(name) or slots is None:
            raise UsageError(f"hostfile {path} line {number}: {raw.strip()!r}: expected "
                             "'HOST slots=N' (N a positive integer)")
        pairs.append((name, slots))
    if not pairs:
        raise UsageError(f"hostfile {path} names no host")
    return merge_hosts(pairs)


def count_slot_lines(lines, what):
    """One line per slot (LSB_DJOB_HOSTFILE, PBS_NODEFILE) -> hosts with their counts."""
    names = [line.strip() for line in lines if line.strip()]
    for name in names:
        if not HOST_NAME.match(name):
            raise UsageError(f"{what}: {name!r} is not a host name")
    if not names:
        raise UsageError(f"{what} names no host")
    return merge_hosts((name, 1) for name in names)


def parse_lsf_mcpu_hosts(text):
    """LSB_MCPU_HOSTS 'h1 4 h2 4' -> [('h1', 4), ('h2', 4)]."""
    words = text.split()
    pairs = [(words[i], positive_int(words[i + 1])) for i in range(0, len(words) - 1, 2)]
    if not words or len(words) % 2 or any(s is None or not HOST_NAME.match(h) for h, s in pairs):
        raise UsageError(f"LSB_MCPU_HOSTS={text!r}: expected 'HOST SLOTS HOST SLOTS ...'")
    return merge_hosts(pairs)


def split_outside_brackets(text):
    """'node[01-03,07],gpu5' -> ['node[01-03,07]', 'gpu5']."""
    items, depth, start = [], 0, 0
    for i, c in enumerate(text):
        depth += (c == "[") - (c == "]")
        if c == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    items.append(text[start:])
    return items


def expand_range_list(ranges, what):
    """'01-03,7' -> ['01', '02', '03', '7']: a range keeps its low bound's width."""
    out = []
    for part in ranges.split(","):
        m = re.fullmatch(r"([0-9]+)(?:-([0-9]+))?", part)
        if not m or (m.group(2) and int(m.group(2)) < int(m.group(1))):
            raise UsageError(f"{what}: [{ranges}] is not a list of numbers and ranges (1-4,7)")
        low, high = m.group(1), m.group(2) or m.group(1)
        if len(out) + int(high) - int(low) >= MAX_HOSTS:
            raise UsageError(f"{what}: [{ranges}] names more than {MAX_HOSTS} hosts")
        out += [str(n).zfill(len(low)) for n in range(int(low), int(high) + 1)]
    return out


def expand_hostlist(text, what="SLURM_JOB_NODELIST"):
    """Slurm's hostlist: 'node[01-03,07],gpu5' -> node01 node02 node03 node07 gpu5.

    Several bracket groups in one name give every combination (Slurm's
    multi-dimensional names: 'r[1-2]n[1-2]' -> r1n1 r1n2 r2n1 r2n2).
    """
    hosts = []
    for item in split_outside_brackets(text.strip()):
        names = [""]
        rest = item
        while rest:
            m = re.match(r"([^\[\]]*)\[([^\[\]]*)\]", rest)
            if not m:
                if "[" in rest or "]" in rest:
                    raise UsageError(f"{what}={text!r}: unbalanced brackets in {item!r}")
                names, rest = [n + rest for n in names], ""
                break
            names = [n + m.group(1) + v for n in names for v in expand_range_list(m.group(2), what)]
            rest = rest[m.end():]
        for name in names:
            if not HOST_NAME.match(name):
                raise UsageError(f"{what}={text!r}: {item!r} is not a host or a host range")
        hosts += names
    return hosts


def parse_tasks_per_node(text, what="SLURM_TASKS_PER_NODE"):
    """Slurm's counts: '2(x3),1' -> [2, 2, 2, 1]."""
    counts = []
    for item in text.split(","):
        m = re.fullmatch(r"\s*([0-9]+)(?:\(x([0-9]+)\))?\s*", item)
        if not m or int(m.group(1)) < 1 or (m.group(2) and int(m.group(2)) < 1):
            raise UsageError(f"{what}={text!r}: expected counts like 2(x3),1")
        counts += [int(m.group(1))] * int(m.group(2) or 1)
    return counts


def read_lines(path, what):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.readlines()
    except OSError as e:
        raise UsageError(f"{what} {path}: {e.strerror}")


def lsf_hosts(env):
    if env.get("LSB_DJOB_HOSTFILE"):
        path = env["LSB_DJOB_HOSTFILE"]
        return "LSB_DJOB_HOSTFILE", count_slot_lines(read_lines(path, "LSB_DJOB_HOSTFILE"),
                                                     f"LSB_DJOB_HOSTFILE {path}")
    if env.get("LSB_MCPU_HOSTS"):
        return "LSB_MCPU_HOSTS", parse_lsf_mcpu_hosts(env["LSB_MCPU_HOSTS"])
    return None


def slurm_hosts(env):
    nodelist_var = next((v for v in ("SLURM_JOB_NODELIST", "SLURM_NODELIST") if env.get(v)), None)
    if nodelist_var is None:
        return None
    nodes = expand_hostlist(env[nodelist_var], nodelist_var)
    counts_var = next((v for v in ("SLURM_TASKS_PER_NODE", "SLURM_JOB_CPUS_PER_NODE")
                       if env.get(v)), None)
    if counts_var is None:
        raise UsageError(f"{nodelist_var} is set but neither SLURM_TASKS_PER_NODE nor "
                         "SLURM_JOB_CPUS_PER_NODE says how many ranks each node takes")
    counts = parse_tasks_per_node(env[counts_var], counts_var)
    if len(counts) != len(nodes):
        raise UsageError(f"{counts_var}={env[counts_var]!r} gives {len(counts)} counts for the "
                         f"{len(nodes)} nodes of {nodelist_var}={env[nodelist_var]!r}")
    return f"{nodelist_var} and {counts_var}", merge_hosts(zip(nodes, counts))


def pbs_hosts(env):
    if not env.get("PBS_NODEFILE"):
        return None
    path = env["PBS_NODEFILE"]
    return "PBS_NODEFILE", count_slot_lines(read_lines(path, "PBS_NODEFILE"),
                                            f"PBS_NODEFILE {path}")


def scheduler_hosts(env):
    """(source, hosts) from the first scheduler whose allocation is in env, or None."""
    for find in (lsf_hosts, slurm_hosts, pbs_hosts):
        found = find(env)
        if found:
            return found
    return None


def format_hosts(hosts):
    return ",".join(f"{name}:{slots}" for name, slots in hosts)


def place_ranks(hosts, np, source):
    """The first np slots in order, as hosts; more ranks than slots is an error."""
    total = sum(slots for _, slots in hosts)
    if np > total:
        raise UsageError(f"-np {np} is more than the {total} slot{'s' * (total != 1)} of "
                         f"{format_hosts(hosts)} (from {source})")
    placed, left = [], np
    for name, slots in hosts:
        if left == 0:
            break
        placed.append((name, min(slots, left)))
        left -= placed[-1][1]
    return placed
