#!/usr/bin/python3
"""kolorun: start a kolo program on one host or many: through MPICH's mpiexec (Hydra),
or without it in kolo's socket world, of fixed size or elastic.

usage: kolorun [options] [--] PROGRAM [ARGS...]

  kolorun -np 8 -H a:4,b:4 ./train --epochs 10
  kolorun --hostfile hosts.txt python3 train.py
  kolorun ./train                    inside a bsub, sbatch or qsub job: its allocation
  kolorun --world socket -np 2 python3 train.py         no mpiexec
  kolorun --elastic -np 4 --min-np 2 --host-discovery-script ./hosts.sh python3 train.py

Where the ranks go, first match wins: -H / --hostfile; else the scheduler's
allocation (LSF: LSB_DJOB_HOSTFILE or LSB_MCPU_HOSTS; Slurm: SLURM_JOB_NODELIST with
SLURM_TASKS_PER_NODE; PBS: PBS_NODEFILE); else this machine alone. Ranks fill each
host's slots in order (block placement); -np defaults to every slot. kolo's knobs
are flags here and reach every rank as KOLO_* variables; -x passes others.

The world (--world): mpi builds one mpiexec.mpich command and execs it, so the
job's exit status and signals are mpiexec's; each rank is bound to a core (Hydra's
-bind-to core) unless --no-bind. socket starts every rank itself (this host: fork
and exec; others: ssh or --launcher-exec), with torchrun's, kolo's and horovodrun's
variables, forwards signals, stops the others when one fails and exits with the
job's status. auto (the default) is mpi when mpiexec.mpich is on PATH, else
socket, as horovodrun falls back to Gloo without mpirun. --elastic (Horovod's
flags) runs the socket world's elastic driver. --dry-run prints the mpiexec
command, or each worker's environment and command, and runs nothing.
A mistake in the command line or the allocation is one line on stderr and exit 2.

Python standard library only, for /usr/bin/python3: the parsing (bracket ranges,
repeat counts, hostfiles, shell quoting) is kept in small functions that
tests/kolorun/kolorun_test.py tests one by one; the socket world's launcher and
the elastic driver are the package kololaunch beside this script (share/kolo
when installed). See docs/kolorun.md.
"""

import os
import re
import shlex
import shutil
import sys


def _find_kololaunch():
    """The folder holding kololaunch: beside this script (the source tree), or
    ../share/kolo (the build tree's bin/ and an installation's)."""
    here = os.path.dirname(os.path.realpath(__file__))
    for folder in (here, os.path.join(here, "..", "share", "kolo")):
        if os.path.isfile(os.path.join(folder, "kololaunch", "__init__.py")):
            return os.path.normpath(folder)
    sys.exit("kolorun: its package kololaunch is not beside it nor in %s" %
             os.path.normpath(os.path.join(here, "..", "share", "kolo")))


sys.dont_write_bytecode = True  # no __pycache__ beside an installed script
sys.path.insert(0, _find_kololaunch())
from kololaunch import elastic_driver, processes, static_job  # noqa: E402
from kololaunch.common import UsageError, positive_int  # noqa: E402,F401
from kololaunch.discovery import check_cooldown_range  # noqa: E402
from kololaunch.hosts import (  # noqa: E402,F401 (tests use them as kolorun.X)
    count_slot_lines, expand_hostlist, expand_range_list, format_hosts, merge_hosts,
    parse_host_list, parse_hostfile, parse_lsf_mcpu_hosts, parse_tasks_per_node, place_ranks,
    read_lines, scheduler_hosts, split_outside_brackets)

MPIEXEC = "mpiexec.mpich"
WORLDS = ("auto", "mpi", "socket")

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
    # The socket world's (transports/socket/launch_env.h).
    ("--socket-ifname", "KOLO_SOCKET_IFNAME", "NAME", non_empty("a network interface name"),
     "socket world: listen on this interface's address (default: the one that reaches the "
     "store)"),
    ("--init-timeout-seconds", "KOLO_INIT_TIMEOUT_SECONDS", "S",
     number_check(0.001, "a number > 0", high=1e6),
     "socket world: how long kolo_init waits for the store and every rank"),
    ("--store-dir", "KOLO_STORE_DIR", "DIR", non_empty("a directory"),
     "socket world on one host: meet through a file store in DIR (one per job)"),
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
    ("--deterministic", "KOLO_DETERMINISTIC", "1",
     "reduce floating sums, averages and products in rank order: the same bits whatever the "
     "transport and sizes (docs/deterministic.md)"),
    ("--no-deterministic", "KOLO_DETERMINISTIC", "0", "the default order (each path its own)"),
]
# The socket world's knobs that kolorun sets itself for every worker (names.py):
# the world, the job's secret, the store's port and the generation.
LAUNCHER_KNOBS = ("KOLO_WORLD", "KOLO_JOB_TOKEN", "KOLO_STORE_ADDR", "KOLO_STORE_PORT",
                  "KOLO_GENERATION")
# Every knob of the socket world, flag or set by kolorun: kolo-info lists them once
# libkolo has the socket world (kolorun_test.py allows their absence before).
SOCKET_WORLD_KNOBS = LAUNCHER_KNOBS + ("KOLO_SOCKET_IFNAME", "KOLO_INIT_TIMEOUT_SECONDS",
                                       "KOLO_STORE_DIR")


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
        self.world = "auto"
        self.given = set()       # the flags given, by their main name
        self.prepend_rank = False
        self.master_port = None
        self.launcher_address = None
        # --elastic (Horovod's flags); None: not given.
        self.elastic = False
        self.min_np = None
        self.max_np = None
        self.discovery_script = None
        self.slots = None
        self.reset_limit = None
        self.cooldown_range = None
        self.elastic_timeout = None


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


def count(attribute, low, what, high=None):
    def take(opts, text, flag, env):
        value = int(text) if re.fullmatch(r"[0-9]+", text) else None
        if value is None or value < low or (high is not None and value > high):
            raise UsageError(f"{flag} {text!r}: expected {what}")
        setattr(opts, attribute, value)
    return take


def take_world(opts, text, flag, env):
    if text not in WORLDS:
        raise UsageError(f"{flag} {text!r}: expected one of {', '.join(WORLDS)}")
    opts.world = text


def take_seconds(opts, text, flag, env):
    try:
        value = float(text)
    except ValueError:
        value = -1
    if not 0 < value < 1e7:
        raise UsageError(f"{flag} {text!r}: expected a number of seconds > 0")
    opts.elastic_timeout = value


def take_cooldown(opts, text, flag, env):
    low, high = (int(t) if re.fullmatch(r"[0-9]+", t) else None for t in text.split())
    if low is None or high is None:
        raise UsageError(f"{flag} {text!r}: expected MIN MAX, two whole numbers of seconds")
    check_cooldown_range(low, high)
    opts.cooldown_range = (low, high)


# flag -> (metavar or None for a switch, action, help); a metavar of two words
# takes two arguments.
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
    "--world": ("WORLD", take_world, "auto (default: mpi when mpiexec.mpich is on PATH, else "
                "socket), mpi (through mpiexec) or socket (kolorun starts every rank)"),
    "--prepend-rank": (None, switch("prepend_rank", True),
                       "start each output line with its rank: [3] (mpiexec's -prepend-rank)"),
    "--master-port": ("PORT", count("master_port", 1, "a port from 1 to 65534", 65534),
                      "socket world: MASTER_PORT (kolo's store then listens on PORT+1); "
                      "default: two ports free here, or 29500 when rank 0 is elsewhere"),
    "--launcher-address": ("ADDR", store("launcher_address"),
                           "socket world: this host's address as the others reach it "
                           "(default: the one on the route to them)"),
    "--elastic": (None, switch("elastic", True),
                  "an elastic job (Horovod's): workers come and go, the world re-forms"),
    "--min-np": ("N", count("min_np", 1, "a number of ranks >= 1"),
                 "elastic: fewer ranks than this for --elastic-timeout ends the job "
                 "(default -np)"),
    "--max-np": ("N", count("max_np", 1, "a number of ranks >= 1"),
                 "elastic: never more ranks than this (default: every slot)"),
    "--host-discovery-script": ("SCRIPT", store("discovery_script"),
                                "elastic: prints the available hosts, HOST or HOST:SLOTS a "
                                "line; run every second"),
    "--slots": ("N", count("slots", 1, "a number of slots >= 1"),
                "elastic: slots of a host the discovery script prints without :SLOTS"),
    "--reset-limit": ("N", count("reset_limit", 0, "a number of re-formations >= 0"),
                      "elastic: the job fails rather than re-form more than N times"),
    "--blacklist-cooldown-range": ("MIN MAX", take_cooldown,
                                   "elastic: a failed host returns after MIN to MAX seconds "
                                   "(default: never)"),
    "--elastic-timeout": ("S", take_seconds,
                          "elastic: how long to wait for --min-np slots, and for every worker "
                          "to re-form (default 600, or HOROVOD_ELASTIC_TIMEOUT)"),
    "--dry-run": (None, switch("dry_run", True),
                  "print the mpiexec command (socket world: each worker's) and exit"),
    "--verbose": (None, switch("verbose", True), "say where the hosts came from, and the command"),
    "--help": (None, switch("help", True), "this text"),
}
ALIASES = {"-n": "-np", "--num-proc": "-np", "--hosts": "-H", "-hostfile": "--hostfile",
           "--env": "-x", "-v": "--verbose", "-h": "--help", "-prepend-rank": "--prepend-rank",
           "-l": "--prepend-rank", "--min-num-proc": "--min-np", "--max-num-proc": "--max-np",
           "--slots-per-host": "--slots"}
ELASTIC_ONLY = ("--max-np", "--slots", "--reset-limit", "--blacklist-cooldown-range",
                "--elastic-timeout")
MPI_ONLY = ("--mpi-args", "--mpiexec", "--bind-to", "--launcher")


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
        opts.given.add(flag)
        if metavar is None:
            if has_value:
                raise UsageError(f"{flag} takes no value")
            action(opts, flag, env)
        else:
            words = len(metavar.split())
            if not has_value or words > 1:
                if has_value or i + words >= len(argv):
                    raise UsageError(f"{flag} needs {'a value' if words == 1 else 'values'} "
                                     f"({metavar})")
                value = " ".join(argv[i + 1:i + 1 + words])
                i += words
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
    if opts.prepend_rank:
        cmd += ["-prepend-rank"]
    for name, value in opts.genv.items():
        cmd += ["-genv", name, value]
    return cmd + ["-n", str(opts.np)] + opts.program


def choose_world(opts, env):
    """"mpi" or "socket" for the options, or UsageError for options of the other."""
    opts.elastic = opts.elastic or opts.discovery_script is not None or opts.min_np is not None
    if not opts.elastic and opts.given & set(ELASTIC_ONLY):
        flag = next(f for f in ELASTIC_ONLY if f in opts.given)
        raise UsageError(f"{flag} is for elastic jobs: add --elastic")
    mpi_flags = [f for f in MPI_ONLY if f in opts.given and
                 not (f == "--launcher" and opts.launcher == "ssh")]
    if opts.elastic and opts.world == "mpi":
        raise UsageError("--elastic needs --world socket: MPICH cannot re-form a world in "
                         "process (MPIX_Comm_shrink is a stub in MPICH 4.0.2)")
    world = "socket" if opts.elastic else opts.world
    if world == "auto":
        found = shutil.which(opts.mpiexec, path=env.get("PATH", os.defpath))
        world = "mpi" if mpi_flags or found else "socket"
    if world == "socket" and mpi_flags:
        raise UsageError(f"{mpi_flags[0]} is mpiexec's: not for the socket world "
                         "(--world socket or --elastic)")
    if world == "mpi":
        socket_flags = [f for f in ("--master-port", "--launcher-address") if f in opts.given]
        if socket_flags:
            raise UsageError(f"{socket_flags[0]} is for the socket world: add --world socket")
    for name in LAUNCHER_KNOBS:
        if world == "socket" and name in opts.genv:
            raise UsageError(f"{name} is kolorun's to set in the socket world "
                             f"(given by {opts.genv_from[name]})")
    return world


def plan_mpi(opts, env):
    """(mpiexec argv, notes for --verbose) for kolorun's command line."""
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
    return cmd, notes


def run_mpi(opts, env, out, err, execv):
    cmd, notes = plan_mpi(opts, env)
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


def run_socket(opts, env, out, err):
    """A socket-world job of fixed size (kololaunch/static_job.py)."""
    source, hosts = resolve_hosts(opts, env)
    check_program(opts.program, env)
    if opts.launcher not in (None, "ssh"):
        raise UsageError(f"--launcher {opts.launcher}: the socket world reaches other hosts "
                         "with ssh, or --launcher-exec PATH")
    if hosts:
        opts.np = opts.np or sum(slots for _, slots in hosts)
        placed = place_ranks(hosts, opts.np, source)
    elif opts.np is None:
        raise UsageError("-np is needed when no hosts are given (-H, --hostfile or a "
                         "scheduler's allocation)")
    else:
        placed = [("localhost", opts.np)]
    labels = processes.OutputLabels(getattr(out, "buffer", out), getattr(err, "buffer", err)) \
        if opts.prepend_rank else None
    workers = static_job.plan_workers(opts, placed, env, static_job.new_token(), labels)
    if opts.verbose:
        err.write(f"kolorun: the socket world, {opts.np} rank{'s' * (opts.np != 1)} on "
                  f"{format_hosts(placed)}" + (f" (hosts from {source})" if source else "") + "\n")
    if opts.dry_run:
        out.write("".join(line + "\n" for line in static_job.describe(workers)))
        return 0
    out.flush()
    err.flush()
    return static_job.run(workers, err)


def run_elastic(opts, env, out, err):
    """An elastic job (kololaunch/elastic_driver.py): Horovod's driver over the socket
    world."""
    if opts.discovery_script is not None and (opts.hosts or opts.hostfile):
        raise UsageError("give --host-discovery-script or -H/--hostfile, not both")
    fixed = []
    if opts.discovery_script is None:
        source, fixed = resolve_hosts(opts, env)
        if not fixed:
            if opts.np is None and opts.min_np is None:
                raise UsageError("-np is needed when no hosts are given (-H, --hostfile, a "
                                 "scheduler's allocation or --host-discovery-script)")
            fixed = [("localhost", opts.np or opts.min_np)]
    elastic_driver.check_options(opts, fixed, env)
    check_program(opts.program, env)
    if opts.dry_run:
        out.write("".join(line + "\n" for line in elastic_driver.describe(opts, fixed)))
        return 0
    out.flush()
    err.flush()
    return elastic_driver.run(opts, fixed, env, err)


def main(argv, env, out=sys.stdout, err=sys.stderr, execv=os.execv):
    try:
        opts = parse_args(argv, env)
        if opts.help:
            out.write(usage())
            return 0
        world = choose_world(opts, env)
        if world == "mpi":
            return run_mpi(opts, env, out, err, execv)
        if opts.verbose and opts.world == "auto" and not opts.elastic:
            err.write(f"kolorun: {opts.mpiexec} is not on PATH: the socket world\n")
        if opts.elastic:
            return run_elastic(opts, env, out, err)
        return run_socket(opts, env, out, err)
    except UsageError as e:
        err.write(f"kolorun: {e}\n")
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], os.environ))
