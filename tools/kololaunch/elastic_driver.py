"""kolorun --elastic: the driver of an elastic job, after Horovod's
(horovod/runner/elastic/driver.py), over the socket world.

    kolorun --elastic -np 4 --min-np 2 --max-np 8 \\
        --host-discovery-script ./hosts.sh --slots 2 python3 train.py

A generation is one forming of the world: its hosts, its rank assignment, its
workers. The driver's main thread (run) loops every POLL_SECONDS: it takes the
discovery thread's latest answer, reaps exited workers into the generation's
registry (registry.py), and once every worker of the generation has recorded a
state decides (registry.decide): end the job, or form the next generation as soon
as --min-np slots are available. Workers re-form through the service (service.py):
a survivor says READY and waits for its next assignment; new hosts' workers are
started with theirs in the environment.

Note [Rank 0 survives]
Ranks follow Horovod's assignment (slots.assign_slots) over the hosts in
discovery's order, where old hosts keep their place and a host with a failure
is blacklisted: so rank 0 is on the oldest host still in the job, whose workers
all survived, and sync() broadcasts the state from rank 0. A generation with no
host of the one before could not receive the state: the job fails instead.

Host changes: when discovery changes the hosts so that the assignment would
change, the driver records an update against the current generation; rank 0
reads it at check_host_updates() (GET /updates) and every rank raises
HostsUpdatedInterrupt at the same step.

Timeouts (--elastic-timeout, default 600 s or HOROVOD_ELASTIC_TIMEOUT): the wait
for enough slots, and the wait for every worker of a generation to record a state
once one has re-formed or failed (a worker that never does, e.g. stopped with
SIGSTOP, is killed and counted as failed; workers that finish are waited for).
"""

import os
import sys
import threading
import time

from . import names, processes, registry, slots, static_job, store
from .common import UsageError
from .discovery import DISCOVERY_SECONDS, DiscoveryError, DiscoveryScript, FixedHosts, HostManager
from .registry import FAILURE, READY, SUCCESS, Registry
from .service import Service

POLL_SECONDS = 0.05
DEFAULT_ELASTIC_TIMEOUT = 600
ELASTIC_INIT_TIMEOUT_SECONDS = 30  # Note [A forming generation's timeout] (store.py)


class Driver:
    """One elastic job. `lock` guards everything the service's threads read."""

    def __init__(self, opts, discovery, env, err, clock=time.monotonic):
        self.opts, self.discovery, self.env, self.err = opts, discovery, env, err
        self.clock = clock
        self.lock = threading.Lock()
        self.hosts = HostManager(opts.cooldown_range)
        self.token = static_job.new_token()
        self.generation = -1
        self.assignment = {}     # key -> Slot, the current generation's
        self.shared = {}         # the current generation's shared variables
        self.registry = None
        self.decided = False     # the current registry's decision is taken
        self.resets = 0
        self.workers = {}        # key -> Worker still running
        self.done = []           # Workers that ended
        self.offered = {}        # key -> ports its host found free (POST /ready)
        self.updates = []        # (generation, UPDATE_* bits) from discovery
        self.need = opts.np      # slots needed to form the next generation
        self.waiting_since = None
        self.ending = None       # (status, message) once the job ends
        self.labels = processes.OutputLabels(sys.stdout.buffer, sys.stderr.buffer) \
            if opts.prepend_rank else None
        self._found = None       # discovery's latest answer, or a DiscoveryError
        self._found_new = False
        self._last_warning = None
        self._stop = threading.Event()
        self.service = None
        self.store = None  # kolo's store, when this process can serve it

    # ---- the service's requests (service.py), on its threads ----------------------

    def ready(self, key, generation, ports):
        with self.lock:
            if len(ports) == 2:
                self.offered[key] = ports
            if self.registry and generation == self.generation:
                if self.registry.record(key, READY, self.clock()):
                    self.note("%s (rank %d) is ready to re-form" % (key, self.assignment[key].rank))
            return {"ok": True}

    def assignment_for(self, key, after):
        with self.lock:
            if self.ending:
                return {"stop": self.ending[1] or "the job has ended"}
            if self.generation <= after or self.waiting_since is not None:
                return {"pending": True}
            if key not in self.assignment:
                return {"removed": True}
            slot = self.assignment[key]
            env = dict(self.shared)
            env.update(slots.slot_env(slot))
            return {"generation": self.generation, "slot": slots.slot_json(slot), "env": env}

    def updates_since(self, generation):
        with self.lock:
            bits = 0
            for g, result in self.updates:
                if g >= generation:
                    bits |= result
            return {"updated": bool(bits), "result": bits}

    def status(self):
        with self.lock:
            return {"generation": self.generation, "resets": self.resets,
                    "assignment": {k: s.rank for k, s in self.assignment.items()},
                    "size": len(self.assignment),
                    "states": dict(self.registry.states) if self.registry else {},
                    "blacklisted": sorted(h for h in self.hosts.host_slots
                                          if self.hosts.is_blacklisted(h)),
                    "waiting": self.waiting_since is not None,
                    "ending": list(self.ending) if self.ending else None}

    # ---- the main thread ------------------------------------------------------------

    def note(self, text):
        if self.opts.verbose:
            self.err.write("kolorun: %s\n" % text)
            self.err.flush()

    def say(self, text):
        self.err.write("kolorun: %s\n" % text)
        self.err.flush()

    def run(self):
        """Runs the job to its end; returns its exit status."""
        threading.Thread(target=self._discover, daemon=True).start()
        try:
            with static_job.SignalForwarding(lambda: list(self.workers.values())) as signals:
                self.signals = signals
                self.waiting_since = self.clock()
                while not self._finished():
                    time.sleep(POLL_SECONDS)
                    with self.lock:
                        self._step()
        finally:
            self._stop.set()
            if self.service:
                self.service.stop()
            if self.store:
                self.store.stop()
        for w in self.done:
            w.wait_output()
        if self.ending[1]:
            self.say(self.ending[1])
        return self.ending[0]

    def _finished(self):
        with self.lock:
            return self.ending is not None and not self.workers

    def _step(self):
        if self.signals.ending and not self.ending:
            self._end(128 + self.signals.last, None, stop=False)
        self._take_discovery()
        self._reap()
        if self.registry and self.registry.complete() and not self.decided and not self.ending:
            self._decide()
        if self.waiting_since is not None and not self.ending:
            self._try_form()
        self._check_timeouts()

    def _discover(self):
        while not self._stop.is_set():
            try:
                found = self.discovery.find()
            except DiscoveryError as e:
                found = e
            with self.lock:
                self._found, self._found_new = found, True
            self._stop.wait(DISCOVERY_SECONDS)

    def _take_discovery(self):
        if not self._found_new:
            return
        found, self._found_new = self._found, False
        if isinstance(found, DiscoveryError):
            if self.generation < 0 and not self.hosts.host_slots:
                self._end(1, str(found))
            elif str(found) != self._last_warning:
                self.say("warning: %s; keeping the hosts found before" % found)
            self._last_warning = str(found)
            return
        self._last_warning = None
        result = self.hosts.update(found)
        if not result:
            return
        self.note("hosts now: %s" % ",".join("%s:%d" % hs for hs in self.hosts.current()))
        if self.generation >= 0 and not self.ending and self.waiting_since is None:
            self._record_update(result)

    def _record_update(self, result):
        """An update, if the hosts now would give another assignment (Horovod's test)."""
        nxt = slots.assign_slots(self.hosts.current(), self.opts.max_np)
        if len(nxt) < self.opts.min_np:
            return
        if [tuple(s) for s in nxt] == [tuple(s) for s in sorted(self.assignment.values(),
                                                                    key=lambda s: s.rank)]:
            return
        self.updates.append((self.generation, result))
        self.note("hosts changed (%s): the workers re-form at their next check_host_updates()"
                  % describe_update(result))

    def _reap(self):
        for key, w in list(self.workers.items()):
            if w.poll() is None:
                continue
            del self.workers[key]
            self.done.append(w)
            counted = (self.registry is not None and not self.decided and not self.ending
                       and not self.hosts.is_blacklisted(w.slot.host))
            state = SUCCESS if w.status == 0 else FAILURE
            if counted and self.registry.record(key, state, self.clock()):
                if state == FAILURE:
                    self.say("%s (rank %d of generation %d) exited with status %d" % (
                        key, self.assignment[key].rank, self.generation, w.status))
            else:
                self.note("%s exited with status %d (no longer in the job)" % (key, w.status))

    def _decide(self):
        self.decided = True
        action, message, bad = registry.decide(
            self.registry, lambda k: self.assignment[k].host,
            lambda h, bad: h in bad or self.hosts.is_blacklisted(h), self.resets,
            self.opts.reset_limit)
        for host in bad:
            self.hosts.blacklist(host)
            self.say("host %s is blacklisted: a worker failed there%s" % (host, (
                "" if self.opts.cooldown_range is None else
                " (back after a cooldown within --blacklist-cooldown-range %d %d)"
                % tuple(self.opts.cooldown_range))))
        for key, w in self.workers.items():
            if self.hosts.is_blacklisted(w.slot.host):
                w.stop()
        if action == "finish":
            self._end(*self._finish_status())
        elif action == "fail":
            self._end(1, "the elastic job failed: " + message)
        else:
            self.resets += 1
            self.need = self.opts.min_np
            self.waiting_since = self.clock()

    def _finish_status(self):
        """(status, message) of a job some worker finished: 0 if all of them did."""
        reg = self.registry
        if len(reg.keys(SUCCESS)) == len(reg.expected):
            return 0, None
        others = [k for k in reg.expected if k not in reg.keys(SUCCESS)]
        return 1, ("generation %d ended with %d worker(s) finished and %s failed or re-forming: "
                   "the job ends with status 1" % (reg.generation, len(reg.keys(SUCCESS)),
                                                   ", ".join(others)))

    def _try_form(self):
        assigned = slots.assign_slots(self.hosts.current(), self.opts.max_np)
        if len(assigned) < self.need:
            return
        before = {s.host for s in self.assignment.values()}
        if before and not before & {s.host for s in assigned}:
            self._end(1, "the elastic job failed: no host of generation %d (%s) is left to "
                      "take the state from" % (self.generation, ", ".join(sorted(before))))
            return
        self._form(assigned)

    def _form(self, assigned):
        """Generation g + 1 on `assigned`: its world, and workers for its new slots.
        See Note [Rank 0 survives]."""
        g = self.generation + 1
        rank0 = assigned[0]
        offered = self.offered.get(rank0.key) if rank0.key in self.workers else None
        addr, port, store_port = static_job.master(
            assigned, self.opts.master_port if offered is None else None,
            self.opts.launcher_address, offered)
        if self.service is None:
            self._start_service(assigned)
        shared = dict(self.opts.genv)
        shared.update(slots.world_env(self.token, addr, port, store_port, g))
        # Note [A forming generation's timeout] (store.py).
        if names.KOLO_INIT_TIMEOUT_SECONDS not in self.env:
            shared.setdefault(names.KOLO_INIT_TIMEOUT_SECONDS, str(ELASTIC_INIT_TIMEOUT_SECONDS))
        if self.store:  # Note [The driver serves the store] (store.py)
            shared.update({names.KOLO_STORE_ADDR: self.store.address,
                           names.KOLO_STORE_PORT: str(self.store.port)})
        shared.update({names.HOROVOD_ELASTIC: "1", names.KOLO_ELASTIC_ADDR: self.service.address,
                       names.KOLO_ELASTIC_PORT: str(self.service.port)})
        self.generation, self.shared, self.decided = g, shared, False
        self.assignment = {s.key: s for s in assigned}
        self.registry = Registry(g, [s.key for s in assigned])
        self.waiting_since = None
        self.offered = {}
        self.note("generation %d: %d rank(s) on %s; rank 0 at %s:%d" % (
            g, len(assigned), ",".join(sorted({s.host for s in assigned})), addr, store_port))
        for slot in assigned:
            if slot.key not in self.workers:
                self._start_worker(slot)
            if self.service.address.startswith("127.") and \
                    not processes.is_local_host(slot.host):
                self.say("warning: %s is another host, but the elastic service listens on %s: "
                         "its workers cannot re-form (give --launcher-address)" % (
                             slot.host, self.service.address))

    def _start_service(self, assigned):
        remote = [s.host for s in assigned if not processes.is_local_host(s.host)]
        address = self.opts.launcher_address or (
            static_job.reach_from_here(remote[0]) if remote else "127.0.0.1")
        self.service = Service(self, address, self.token)
        self.service.start()
        self.note("elastic service at %s:%d" % (address, self.service.port))
        self.store, why = store.serve(address, self.token)
        if self.store:
            self.note("kolo's store at %s:%d" % (address, self.store.port))
        else:
            self.note("kolo's store is served by each generation's rank 0: %s" % why)

    def _start_worker(self, slot):
        key = slot.key
        w = static_job.new_worker(
            self.opts, self.env, self.shared, slot, key, self.labels,
            lambda k=key: str(self.assignment[k].rank) if k in self.assignment else k)
        try:
            w.start()
        except OSError as e:
            self.say("cannot start %s: %s" % (key, e.strerror or e))
            self.registry.record(key, FAILURE, self.clock())
            return
        self.workers[key] = w

    def _check_timeouts(self):
        now = self.clock()
        if self.ending:
            if now > self.kill_at:
                for w in self.workers.values():
                    w.kill()
            return
        timeout = self.opts.elastic_timeout
        if self.waiting_since is not None and now - self.waiting_since > timeout:
            have = self.hosts.current()
            self._end(1, "the elastic job failed: fewer than %d slots (--min-np) for %g s "
                      "(--elastic-timeout); available: %s" % (
                          self.need, timeout,
                          ",".join("%s:%d" % hs for hs in have) or "no host"))
            return
        reg = self.registry
        if reg and reg.first_trouble is not None and not reg.complete() \
                and now - reg.first_trouble > timeout:
            for key in reg.missing():
                self.say("%s did not re-form within %g s (--elastic-timeout): stopping it, "
                         "counted as failed" % (key, timeout))
                if key in self.workers:
                    self.workers[key].kill()
                reg.record(key, FAILURE, now)

    def _end(self, status, message, stop=True):
        self.ending = (status, message)
        self.kill_at = self.clock() + processes.GRACE_SECONDS + 2
        if stop:
            for w in self.workers.values():
                w.stop()


def describe_update(result):
    return " and ".join(w for bit, w in ((names.UPDATE_ADDED, "added"),
                                         (names.UPDATE_REMOVED, "removed")) if result & bit)


def elastic_timeout(env):
    text = env.get("HOROVOD_ELASTIC_TIMEOUT")
    try:
        return float(text) if text else DEFAULT_ELASTIC_TIMEOUT
    except ValueError:
        raise UsageError("HOROVOD_ELASTIC_TIMEOUT=%r: expected seconds" % text)


def check_options(opts, fixed_hosts, env):
    """Fills -np, --min-np, --elastic-timeout as Horovod does, or raises UsageError."""
    if opts.discovery_script is None and not fixed_hosts:
        raise UsageError("--elastic needs --host-discovery-script, -H or --hostfile (or a "
                         "scheduler's allocation)")
    if opts.discovery_script is not None and fixed_hosts:
        raise UsageError("give --host-discovery-script or fixed hosts (-H, --hostfile), not both")
    every_slot = sum(n for _, n in fixed_hosts)
    if every_slot and opts.max_np:
        every_slot = min(every_slot, opts.max_np)
    opts.np = opts.np or every_slot or opts.min_np
    if opts.np is None:
        raise UsageError("--elastic with a discovery script needs -np (or --min-np)")
    opts.min_np = opts.min_np or opts.np
    if opts.min_np > opts.np:
        raise UsageError("--min-np %d is more than -np %d" % (opts.min_np, opts.np))
    if opts.max_np is not None and opts.max_np < opts.np:
        raise UsageError("--max-np %d is less than -np %d" % (opts.max_np, opts.np))
    if opts.elastic_timeout is None:
        opts.elastic_timeout = elastic_timeout(env)


def make_discovery(opts, fixed_hosts):
    if opts.discovery_script is not None:
        return DiscoveryScript(opts.discovery_script, opts.slots)
    return FixedHosts(fixed_hosts)


def describe(opts, fixed_hosts):
    """--dry-run's lines for an elastic job (the discovery script is not run)."""
    source = ("discovery script %r every %g s" % (opts.discovery_script, DISCOVERY_SECONDS)
              if opts.discovery_script else
              "fixed hosts " + ",".join("%s:%d" % hs for hs in fixed_hosts))
    lines = ["elastic job: -np %d, --min-np %d, --max-np %s, --reset-limit %s, "
             "--elastic-timeout %g s; hosts from %s" % (
                 opts.np, opts.min_np, opts.max_np or "none", opts.reset_limit
                 if opts.reset_limit is not None else "none", opts.elastic_timeout, source)]
    if fixed_hosts:
        first = slots.assign_slots(fixed_hosts, opts.max_np)
        lines += ["generation 0: %s rank %d (local rank %d)" % (s.key, s.rank, s.local_rank)
                  for s in first]
    return lines


def run(opts, fixed_hosts, env, err):
    """Runs an elastic job (options checked); returns its exit status."""
    driver = Driver(opts, make_discovery(opts, fixed_hosts), env, err)
    return driver.run()
