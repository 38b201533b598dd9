#!/usr/bin/python3
"""kolorun: start a kolo program on one host or many through MPICH's mpiexec (Hydra).

usage: kolorun [options] [--] PROGRAM [ARGS...]

  kolorun -np 8 -H a:4,b:4 ./train --epochs 10
  kolorun --hostfile hosts.txt python3 train.py
  kolorun ./train                    inside a bsub, sbatch or qsub job: its allocation

Where the ranks go, first match wins: -H / --hostfile; else the scheduler's
allocation (LSF: LSB_DJOB_HOSTFILE or LSB_MCPU_HOSTS; Slurm: SLURM_JOB_NODELIST with
SLURM_TASKS_PER_NODE; PBS: PBS_NODEFILE); else this machine alone. Ranks fill each
host's slots in order (block placement); -np defaults to every slot. Each rank is
bound to a core of its host (Hydra's -bind-to core) unless --no-bind. kolo's knobs
are flags here and reach every rank as KOLO_* variables (-genv); -x passes others.

kolorun builds one mpiexec.mpich command and execs it, so the job's exit status and
signals are mpiexec's. --dry-run prints that command (shell-quoted) instead.
A mistake in the command line or the allocation is one line on stderr and exit 2.

Python standard library only, for /usr/bin/python3: the parsing (bracket ranges,
repeat counts, hostfiles, shell quoting) is kept in small functions that
tools/kolorun_test.py tests one by one.
"""

import os
import re
import shlex
import shutil
import sys

MPIEXEC = "mpiexec.mpich"
MAX_HOSTS = 100000  # a bracket range past this is a typo, not a cluster


class UsageError(Exception):
    """A mistake the caller can fix: printed as one line, exit status 2."""


# --- hosts ----------------------------------------------------------------------
# A host list is a list of (name, slots) pairs in placement order, names unique.

HOST_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*\Z")
HOST_FORMAT = "expected NAME or NAME:SLOTS (SLOTS a positive integer), separated by commas"


def positive_int(text):
    """The value of a decimal integer > 0, or None."""
    return int(text) if re.fullmatch(r"[0-9]+", text) and int(text) > 0 else None


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


# --- kolo's knobs as flags ----------------------------------------------------------
# One row per knob in src/common/knobs.cc (kolorun_test.py checks the list against
# kolo-info --json and prints a row to paste for a knob that lacks one): flag,
# variable, metavar, check(text) -> value, help. The checks only catch a typo before
# launch; kolo_init validates every value on every rank anyway, so non_empty() is
# enough for a new knob. Test-only knobs (KOLO_TEST_*) get no flag; -x passes them.

def number_check(low, what, integer=False, high=None):
    def check(text):
        try:
            value = int(text) if integer else float(text)
        except ValueError:
            value = None
        if value is None or value != value or value < low or (high is not None and value > high):
            raise ValueError(what)
        return text
    return check


def fusion_mb(text):
    mib = number_check(0, "a number of MiB >= 0")(text)
    value = float(mib)
    return f"{int(value)}M" if value == int(value) else str(int(value * (1 << 20)))


def non_empty(what):
    def check(text):
        if not text.strip():
            raise ValueError(what)
        return text
    return check


LOG_LEVELS = ("trace", "debug", "info", "warning", "error", "fatal")


def log_level(text):
    if text.lower() not in LOG_LEVELS:
        raise ValueError("one of " + ", ".join(LOG_LEVELS))
    return text.lower()


KNOB_FLAGS = [
    ("--fusion-threshold-mb", "KOLO_FUSION_THRESHOLD", "MB", fusion_mb,
     "fusion buffer size in MiB (0 disables fusion)"),
    ("--cycle-time-ms", "KOLO_CYCLE_TIME_MS", "MS", number_check(0, "a number >= 0"),
     "longest an idle coordinator sleeps between checks"),
    ("--cache-capacity", "KOLO_CACHE_CAPACITY", "N", number_check(0, "an integer >= 0", True),
     "response-cache entries (0 disables the cache)"),
    ("--timeline-filename", "KOLO_TIMELINE", "FILE", non_empty("a file name"),
     "a Chrome-trace timeline: rank 0's file, or every rank's with %r or a directory"),
    ("--stall-check-warning-time-seconds", "KOLO_STALL_CHECK_TIME_SECONDS", "S",
     number_check(0, "a number >= 0"), "warn about names some ranks lack after S seconds"),
    ("--stall-check-shutdown-time-seconds", "KOLO_STALL_SHUTDOWN_TIME_SECONDS", "S",
     number_check(0, "a number >= 0"), "fail stalled names after S seconds (0: never)"),
    ("--thread-affinity", "KOLO_THREAD_AFFINITY", "CORE",
     number_check(-1, "an integer >= -1", True), "pin the coordinator thread to this core"),
    ("--log-level", "KOLO_LOG_LEVEL", "LEVEL", log_level, "one of " + ", ".join(LOG_LEVELS)),
    ("--transport", "KOLO_TRANSPORT", "NAME", non_empty("auto or a transport name"),
     "auto or a transport name (kolo-info lists them)"),
    ("--select", "KOLO_SELECT", "RULES", non_empty("selection rules"),
     "selection rules tried before kolo's table (kolo-info prints the table)"),
    ("--flight-recorder", "KOLO_FLIGHT_RECORDER", "N",
     number_check(0, "an integer from 0 to 16777216", True, 1 << 24),
     "keep each rank's last N operations for hang diagnosis (0 disables)"),
    ("--flight-recorder-dir", "KOLO_FLIGHT_RECORDER_DIR", "DIR", non_empty("a directory"),
     "where each rank writes its flight recorder dump"),
    ("--peer-timeout-seconds", "KOLO_PEER_TIMEOUT_SECONDS", "S",
     number_check(0.05, "a number >= 0.05", high=1e6), "a peer silent this long has failed"),
    ("--large-tensor-bytes", "KOLO_LARGE_TENSOR_BYTES", "SIZE", non_empty("a byte count"),
     "host tensors of this size and up skip the fusion buffer (K/M/G suffixes)"),
    ("--shm-slice-bytes", "KOLO_SHM_SLICE_BYTES", "SIZE", non_empty("a byte count"),
     "the shm transport's slice (K/M/G suffixes)"),
    ("--ring-segment-bytes", "KOLO_RING_SEGMENT_BYTES", "SIZE", non_empty("a byte count"),
     "the ring allreduce's pipelined segment (K/M/G suffixes)"),
    ("--and-carry-bytes", "KOLO_AND_CARRY_BYTES", "SIZE", non_empty("a byte count"),
     "on one node, small cached operations of at most this many bytes ride with the "
     "negotiation's AND (0 to 16K; 0: never)"),
    ("--transport-small", "KOLO_TRANSPORT_SMALL", "NAME", non_empty("auto or a transport name"),
     "the transport tried first for host buckets under 64 KiB"),
    ("--transport-large", "KOLO_TRANSPORT_LARGE", "NAME", non_empty("auto or a transport name"),
     "the transport tried first for host buckets of 64 KiB and up"),
    ("--autotune-log-file", "KOLO_AUTOTUNE_LOG", "FILE", non_empty("a file name"),
     "rank 0 logs autotune's samples here (CSV); a frozen setting in it is reused"),
    ("--autotune-warmup-samples", "KOLO_AUTOTUNE_WARMUP_SAMPLES", "N",
     number_check(0, "an integer from 0 to 1000", True, 1000), "autotune samples discarded first"),
    ("--autotune-sample-seconds", "KOLO_AUTOTUNE_SAMPLE_SECONDS", "S",
     number_check(0.001, "a number from 0.001 to 3600", high=3600), "autotune's sample length"),
    ("--autotune-max-samples", "KOLO_AUTOTUNE_MAX_SAMPLES", "N",
     number_check(2, "an integer from 2 to 1000", True, 1000),
     "autotune freezes after at most N scored samples"),
    ("--world", "KOLO_WORLD", "WORLD", non_empty("one of auto, mpi, socket"),
     "which world kolo_init starts: auto, mpi or socket"),
    ("--socket-ifname", "KOLO_SOCKET_IFNAME", "IF", non_empty("a network interface name"),
     "socket world: listen on this interface's address"),
    ("--store-port", "KOLO_STORE_PORT", "PORT", number_check(0, "a port from 0 to 65535", True, 65535),
     "socket world: the rendezvous store's port (0: MASTER_PORT + 1)"),
    ("--store-dir", "KOLO_STORE_DIR", "DIR", non_empty("a directory"),
     "socket world on one host: meet through a file store in DIR"),
    ("--job-token", "KOLO_JOB_TOKEN", "TOKEN", non_empty("up to 256 bytes"),
     "socket world: the job's secret (a connection without it is dropped)"),
    ("--generation", "KOLO_GENERATION", "N", number_check(-1, "an integer >= -1", True),
     "socket world: this forming of the world (-1: TORCHELASTIC_RESTART_COUNT or 0)"),
    ("--init-timeout-seconds", "KOLO_INIT_TIMEOUT_SECONDS", "S",
     number_check(0.001, "a number > 0"), "socket world: how long kolo_init waits for every rank"),
]
# Flags with a fixed value: (flag, variable, value, help).
KNOB_SWITCHES = [
    ("--hierarchical-allreduce", "KOLO_HIERARCHICAL_ALLREDUCE", "1",
     "every allreduce bucket takes the hierarchical path on several nodes"),
    ("--no-hierarchical-allreduce", "KOLO_HIERARCHICAL_ALLREDUCE", "0",
     "the auto order decides (large buckets only)"),
    ("--no-stall-check", "KOLO_STALL_CHECK_TIME_SECONDS", "0", "no stall warnings"),
    ("--timeline-mark-cycles", "KOLO_TIMELINE_MARK_CYCLES", "1",
     "mark each negotiation cycle in the timeline"),
    ("--autotune", "KOLO_AUTOTUNE", "1",
     "tune fusion, sizes and transport order on the running job (docs/timeline-and-autotune.md)"),
    ("--no-autotune", "KOLO_AUTOTUNE", "0", "no autotune"),
]
TEST_ONLY_KNOBS = ("KOLO_TEST_NODE_SIZE",)


def knob_variables():
    """Every KOLO_* variable kolorun has a flag for."""
    return {row[1] for row in KNOB_FLAGS} | {row[1] for row in KNOB_SWITCHES}


# --- the command line ---------------------------------------------------------------

class Options:
    """What the command line asked for; parse_args fills it."""

    def __init__(self):
        self.np = None
        self.hosts = None        # -H text
        self.hostfile = None
        self.bind = "core"       # Hydra's -bind-to value; None: --no-bind
        self.genv = {}           # KOLO_* and -x variables, in the order given
        self.genv_from = {}      # variable -> the flag that set it
        self.launcher = None
        self.launcher_exec = None
        self.mpi_args = []
        self.mpiexec = MPIEXEC
        self.dry_run = False
        self.verbose = False
        self.help = False
        self.program = []        # PROGRAM ARGS...


def set_genv(opts, name, value, flag):
    if name in opts.genv and opts.genv[name] != value:
        raise UsageError(f"{name} is set twice, by {opts.genv_from[name]} and by {flag}")
    opts.genv[name], opts.genv_from[name] = value, flag


def take_env(opts, text, flag, env):
    """-x VAR (its value here) or -x VAR=VALUE."""
    name, sep, value = text.partition("=")
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise UsageError(f"{flag} {text!r}: expected VAR or VAR=VALUE")
    if not sep:
        if name not in env:
            raise UsageError(f"{flag} {name}: {name} is not set here; give {flag} {name}=VALUE")
        value = env[name]
    set_genv(opts, name, value, f"{flag} {name}")


def take_np(opts, text, flag, env):
    opts.np = positive_int(text)
    if opts.np is None:
        raise UsageError(f"{flag} {text!r}: expected a number of ranks >= 1")


def store(attribute):
    def take(opts, text, flag, env):
        setattr(opts, attribute, text)
    return take


def switch(attribute, value):
    def take(opts, flag, env):
        setattr(opts, attribute, value)
    return take


# flag -> (metavar or None for a switch, action, help)
OPTIONS = {
    "-np": ("N", take_np, "number of ranks (default: every slot of the hosts)"),
    "-H": ("HOSTS", store("hosts"), "hosts and their slots: a:4,b:4 (a bare name has 1 slot)"),
    "--hostfile": ("FILE", store("hostfile"), "'HOST slots=N' lines; '#' comments"),
    "--no-bind": (None, switch("bind", None), "do not bind ranks to cores"),
    "--bind-to": ("WHAT", store("bind"), "Hydra's -bind-to (default core; hwthread, socket, numa)"),
    "-x": ("VAR[=VALUE]", lambda o, t, f, e: take_env(o, t, f, e),
           "set VAR on every rank (to its value here, or VALUE); repeatable"),
    "--launcher": ("NAME", store("launcher"), "Hydra's -launcher: ssh, rsh, fork, slurm, lsf..."),
    "--launcher-exec": ("PATH", store("launcher_exec"), "Hydra's -launcher-exec"),
    "--mpi-args": ("ARGS", lambda o, t, f, e: o.mpi_args.extend(shlex.split(t)),
                   "more mpiexec options, shell-quoted, e.g. '-localhost 10.0.0.1'"),
    "--mpiexec": ("PATH", store("mpiexec"), f"the mpiexec to run (default {MPIEXEC})"),
    "--dry-run": (None, switch("dry_run", True), "print the mpiexec command and exit"),
    "--verbose": (None, switch("verbose", True), "say where the hosts came from, and the command"),
    "--help": (None, switch("help", True), "this text"),
}
ALIASES = {"-n": "-np", "--num-proc": "-np", "--hosts": "-H", "-hostfile": "--hostfile",
           "--env": "-x", "-v": "--verbose", "-h": "--help"}


def knob_action(variable, check, flag):
    def take(opts, text, _flag, env):
        try:
            value = check(text)
        except ValueError as e:
            raise UsageError(f"{flag} {text!r}: expected {e}")
        set_genv(opts, variable, value, flag)
    return take


for _flag, _var, _metavar, _check, _help in KNOB_FLAGS:
    OPTIONS[_flag] = (_metavar, knob_action(_var, _check, _flag), f"{_help} ({_var})")
for _flag, _var, _value, _help in KNOB_SWITCHES:
    OPTIONS[_flag] = (None, lambda o, f, e, v=_var, x=_value: set_genv(o, v, x, f),
                      f"{_help} ({_var}={_value})")


def parse_args(argv, env):
    """kolorun's own options up to PROGRAM (or '--'); the rest is the program's."""
    opts = Options()
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--" or not arg.startswith("-") or arg == "-":
            opts.program = argv[i + (arg == "--"):]
            break
        flag, has_value, value = arg.partition("=") if arg.startswith("--") else (arg, "", "")
        flag = ALIASES.get(flag, flag)
        if flag not in OPTIONS:
            raise UsageError(f"unknown option {arg!r} (kolorun --help lists them)")
        metavar, action, _ = OPTIONS[flag]
        if metavar is None:
            if has_value:
                raise UsageError(f"{flag} takes no value")
            action(opts, flag, env)
        else:
            if not has_value:
                if i + 1 >= len(argv):
                    raise UsageError(f"{flag} needs a value ({metavar})")
                i += 1
                value = argv[i]
            action(opts, value, flag, env)
        i += 1
    return opts


def usage():
    lines = ["usage: kolorun [options] [--] PROGRAM [ARGS...]", ""]
    names = {flag: [flag] for flag in OPTIONS}
    for alias, flag in ALIASES.items():
        names[flag].append(alias)
    for flag, (metavar, _, text) in OPTIONS.items():
        left = ", ".join(names[flag]) + (f" {metavar}" if metavar else "")
        lines.append(f"  {left:<42} {text}")
    return "\n".join(lines) + "\n\n" + __doc__.split("\n\n", 2)[2].split("\n\nPython")[0] + "\n"


# --- the mpiexec command --------------------------------------------------------------

def resolve_hosts(opts, env):
    """(source, hosts): -H, else --hostfile, else the scheduler's; (None, []) for local."""
    if opts.hosts is not None and opts.hostfile is not None:
        raise UsageError("give -H or --hostfile, not both")
    if opts.hosts is not None:
        return "-H", parse_host_list(opts.hosts)
    if opts.hostfile is not None:
        return "--hostfile", parse_hostfile(read_lines(opts.hostfile, "hostfile"), opts.hostfile)
    return scheduler_hosts(env) or (None, [])


def check_program(program, env):
    """A missing or non-executable PROGRAM is the caller's mistake, found before launch."""
    if not program:
        raise UsageError("no program to run (usage: kolorun [options] PROGRAM [ARGS...])")
    name = program[0]
    if "/" in name:
        if not (os.path.isfile(name) and os.access(name, os.X_OK)):
            why = "is not executable" if os.path.isfile(name) else "does not exist"
            raise UsageError(f"program {name!r} {why}")
    elif shutil.which(name, path=env.get("PATH", os.defpath)) is None:
        raise UsageError(f"program {name!r} is not found on PATH")


def build_command(opts, hosts):
    """The mpiexec argv: global options first, then -n and the program."""
    cmd = [opts.mpiexec]
    if opts.launcher:
        cmd += ["-launcher", opts.launcher]
    if opts.launcher_exec:
        cmd += ["-launcher-exec", opts.launcher_exec]
    cmd += opts.mpi_args
    if hosts:
        cmd += ["-hosts", format_hosts(hosts)]
    if opts.bind:
        cmd += ["-bind-to", opts.bind]
    for name, value in opts.genv.items():
        cmd += ["-genv", name, value]
    return cmd + ["-n", str(opts.np)] + opts.program


def plan(argv, env):
    """(options, mpiexec argv, notes for --verbose) for kolorun's command line."""
    opts = parse_args(argv, env)
    if opts.help:
        return opts, None, []
    source, hosts = resolve_hosts(opts, env)
    check_program(opts.program, env)
    notes = []
    if hosts:
        notes.append(f"hosts from {source}: {format_hosts(hosts)}")
        opts.np = opts.np or sum(slots for _, slots in hosts)
        hosts = place_ranks(hosts, opts.np, source)
    elif opts.np is None:
        raise UsageError("-np is needed when no hosts are given (-H, --hostfile or a "
                         "scheduler's allocation)")
    else:
        notes.append("no hosts given and no scheduler allocation: this machine only")
    cmd = build_command(opts, hosts)
    notes.append(f"{opts.np} rank{'s' * (opts.np != 1)}"
                 + (f" on {format_hosts(hosts)}" if hosts else "") + ": " + shlex.join(cmd))
    return opts, cmd, notes


def main(argv, env, out=sys.stdout, err=sys.stderr, execv=os.execv):
    try:
        opts, cmd, notes = plan(argv, env)
        if opts.help:
            out.write(usage())
            return 0
        if opts.verbose:
            for note in notes:
                err.write(f"kolorun: {note}\n")
        if opts.dry_run:
            out.write(shlex.join(cmd) + "\n")
            return 0
        path = shutil.which(opts.mpiexec, path=env.get("PATH", os.defpath))
        if path is None:
            raise UsageError(f"{opts.mpiexec} is not found on PATH (MPICH's launcher: "
                             "install the mpich package, or give --mpiexec PATH)")
        out.flush()
        err.flush()
        try:
            execv(path, cmd)
        except OSError as e:
            raise UsageError(f"cannot start {path}: {e.strerror}")
        return 0  # only a test's execv returns
    except UsageError as e:
        err.write(f"kolorun: {e}\n")
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], os.environ))
