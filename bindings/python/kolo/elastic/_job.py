"""This process's place in an elastic job: its slot (host:local_rank, fixed for
its life, Horovod's identity), its generation, and the driver that assigns the
next one. Outside kolorun --elastic (no KOLO_ELASTIC_ADDR) there is no driver:
the hosts never change and a world cannot re-form (run() re-raises).

Re-forming (reform): leave the world, tell the driver READY with two ports free
on this host (for kolo's store, should this worker be the next rank 0), wait for
the next generation's assignment, and join it through the seam (_world.py). The
driver's answer may instead be "removed" (this host left the job: the process
exits with status 0, as Horovod's worker does) or "stop" (the job ended: exit 1,
with the driver's reason).
"""

import os
import socket
import sys

from . import _driver, _world

# How long a survivor waits for the next generation: the driver ends the job
# itself after --elastic-timeout, so this only bounds a driver that went silent.
ASSIGNMENT_TIMEOUT_SECONDS = 3600


def free_ports(count):
    held = [socket.socket() for _ in range(count)]
    try:
        for s in held:
            s.bind(("", 0))
        return [s.getsockname()[1] for s in held]
    finally:
        for s in held:
            s.close()


class Job:
    """The elastic job this process belongs to; `world` is the seam (KoloWorld)."""

    def __init__(self, env=None, world=None):
        env = os.environ if env is None else env
        self.world = world or _world.KoloWorld()
        self.driver = _driver.DriverClient.from_env(env)
        self.slot = "%s:%s" % (env.get(_driver.HOROVOD_HOSTNAME, socket.gethostname()),
                               env.get(_driver.HOROVOD_LOCAL_RANK, "0"))
        self.generation = int(env.get(_driver.KOLO_GENERATION) or 0)

    @property
    def elastic(self):
        return self.driver is not None

    def hosts_updated(self):
        """(changed, UPDATE_* bits) since this generation formed; rank 0 asks."""
        if self.driver is None:
            return False, 0
        return self.driver.updates_since(self.generation)

    def reform(self):
        """Leaves this generation's world and joins the next one."""
        self.world.shutdown()
        self.driver.ready(self.slot, self.generation, free_ports(2))
        answer = self.driver.next_assignment(self.slot, self.generation,
                                             ASSIGNMENT_TIMEOUT_SECONDS)
        if answer.get("removed"):
            sys.stderr.write("kolo.elastic: %s is no longer in the job (generation %d): "
                             "exiting\n" % (self.slot, self.generation))
            raise SystemExit(0)
        if "stop" in answer:
            raise SystemExit("kolo.elastic: %s: the job ended: %s" % (self.slot, answer["stop"]))
        self.generation = int(answer["generation"])
        self.world.reform(answer["env"])


_current = None


def current():
    """This process's Job (made on first use, from the environment)."""
    global _current
    if _current is None:
        _current = Job()
    return _current


def use(job):
    """Makes `job` this process's Job (tests: a Job over a world of their own)."""
    global _current
    _current = job
