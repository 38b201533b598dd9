"""A socket-world job of fixed size (kolorun --world socket): every rank started at
once, on this host by fork and exec, on others through ssh or --launcher-exec;
the job ends when every worker has, or when one fails.

    kolorun --world socket -np 4 -H a:2,b:2 python3 train.py

Each worker gets the environment torchrun gives (RANK, WORLD_SIZE, LOCAL_RANK,
LOCAL_WORLD_SIZE, GROUP_RANK, ROLE_RANK, MASTER_ADDR, MASTER_PORT, ...), kolo's
(KOLO_WORLD=socket, a random KOLO_JOB_TOKEN, KOLO_STORE_PORT, KOLO_GENERATION=0)
and horovodrun's (HOROVOD_RANK, ...): slots.py and names.py. Where the master is:
master() below. Signals: Note [Signals reach every worker].
"""

import os
import secrets
import shlex
import signal
import time

from . import names, processes, slots
from .common import UsageError

TORCHRUN_PORT = 29500  # torchrun's default MASTER_PORT, for a rank 0 on another host
POLL_SECONDS = 0.05


def master(assigned, master_port=None, launcher_address=None, offered=None):
    """(MASTER_ADDR, MASTER_PORT, KOLO_STORE_PORT) for a job whose rank 0 is
    assigned[0]. The address: 127.0.0.1 when every rank is on this host; rank 0's
    host name when it is another host; else (rank 0 here, others elsewhere)
    --launcher-address or this host's address on the route to the first other
    host. The ports: `offered` (two ports rank 0's own host found free: an elastic
    survivor's), else --master-port and the next, else two ports free here now
    when rank 0 is here, else torchrun's 29500 and the next."""
    rank0 = assigned[0].host
    remote = [s.host for s in assigned if not processes.is_local_host(s.host)]
    if not processes.is_local_host(rank0):
        addr = rank0
    elif not remote:
        addr = "127.0.0.1"
    else:
        addr = launcher_address or reach_from_here(remote[0])
    if offered:
        ports = list(offered)
    elif master_port:
        ports = [master_port, master_port + 1]
    elif processes.is_local_host(rank0):
        ports = processes.free_ports(2)
    else:
        ports = [TORCHRUN_PORT, TORCHRUN_PORT + 1]
    return addr, ports[0], ports[1]


def reach_from_here(host):
    try:
        return processes.routed_address(host)
    except OSError as e:
        raise UsageError("cannot find this host's address on the way to %s (%s): give "
                         "--launcher-address ADDR" % (host, e.strerror or e))


def new_worker(opts, base_env, shared, slot, name, labels=None, label=None):
    """The Worker for `slot`: the launching environment, `shared` (the job's and the
    generation's variables) and the slot's own; through ssh or --launcher-exec when
    the slot's host is another."""
    extra = dict(shared)
    extra.update(slots.slot_env(slot))
    host = None if processes.is_local_host(slot.host) else slot.host
    worker = processes.Worker(name, host, opts.program, processes.worker_env(base_env, extra),
                              os.getcwd(), opts.launcher_exec, labels, label)
    worker.slot, worker.extra, worker.program = slot, extra, opts.program
    return worker


def plan_workers(opts, placed, env, token, labels=None):
    """The Workers of a job placed as [(host, ranks)]: ranks assigned, environments set."""
    assigned = slots.assign_slots(placed)
    addr, port, store_port = master(assigned, opts.master_port, opts.launcher_address)
    shared = dict(opts.genv)
    shared.update(slots.world_env(token, addr, port, store_port, 0))
    return [new_worker(opts, env, shared, slot, "rank %d on %s" % (slot.rank, slot.host),
                       labels, lambda r=slot.rank: str(r))
            for slot in assigned]


def describe(workers):
    """--dry-run's lines: per worker, where it runs and what it gets. The job token
    is drawn at launch and never printed."""
    lines = []
    for w in workers:
        shown = dict(w.extra)
        shown[names.KOLO_JOB_TOKEN] = "<token>"
        where = "this host" if w.host is None else "%s via %s" % (w.host, w.argv[0])
        lines.append("%s (%s): %s %s" % (w.name, where, " ".join(
            shlex.quote("%s=%s" % kv) for kv in shown.items()), shlex.join(w.program)))
    return lines


class SignalForwarding:
    """Note [Signals reach every worker]
    SIGINT, SIGTERM and SIGHUP to kolorun go to every worker's process group, and
    kolorun waits for them to end; a second one stops them (SIGTERM, SIGKILL after
    the grace period). SIGUSR1 and SIGUSR2 are passed on. Workers run in sessions
    of their own, so a terminal's Ctrl-C reaches them only through kolorun, once."""

    FORWARDED = {signal.SIGINT: "INT", signal.SIGTERM: "TERM", signal.SIGHUP: "HUP",
                 signal.SIGUSR1: "USR1", signal.SIGUSR2: "USR2"}

    def __init__(self, workers_fn):
        self._workers_fn = workers_fn
        self.ending = 0          # how many ending signals (INT, TERM, HUP) arrived
        self.last = 0            # the last of them
        self._saved = {}

    def __enter__(self):
        for sig in self.FORWARDED:
            self._saved[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc):
        for sig, handler in self._saved.items():
            signal.signal(sig, handler)

    def _handle(self, sig, frame):
        if sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            self.ending += 1
            self.last = sig
        for w in self._workers_fn():
            if self.ending > 1:
                w.stop()
            else:
                w.signal(self.FORWARDED[sig])


def run(workers, err):
    """Starts every worker, waits; the first failure stops the rest. Returns the
    job's exit status: 0, or the first failing worker's (128 + N for signal N)."""
    status = 0
    with SignalForwarding(lambda: workers):
        for w in workers:
            try:
                w.start()
            except OSError as e:
                err.write("kolorun: cannot start %s: %s\n" % (w.name, e.strerror or e))
                status = 1
                break
        running = [w for w in workers if w.pid is not None]
        while running:
            time.sleep(POLL_SECONDS)
            for w in list(running):
                if w.poll() is None:
                    continue
                running.remove(w)
                if w.status != 0 and status == 0:
                    status = w.status
                    err.write("kolorun: %s exited with status %d%s\n" % (
                        w.name, w.status, "; stopping the other ranks" if running else ""))
                    err.flush()
                    for other in running:
                        other.stop()
            if status and running:
                stop_stragglers(running)
        for w in workers:
            w.wait_output()
    return status


def stop_stragglers(running):
    """Kills what still runs here a little after the wrappers' grace period."""
    deadline = time.monotonic() + processes.GRACE_SECONDS + 2
    while running and time.monotonic() < deadline:
        time.sleep(POLL_SECONDS)
        running[:] = [w for w in running if w.poll() is None]
    for w in running:
        w.kill()


def new_token():
    """The job's secret: 32 random bytes, hex (KOLO_JOB_TOKEN)."""
    return secrets.token_hex(32)
