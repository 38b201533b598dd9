"""Which hosts an elastic job may use now: the discovery script's answer (or the
fixed hosts of -H, --hostfile or the scheduler), less the blacklisted ones, in the
order ranks are assigned. As Horovod's (horovod/runner/elastic/discovery.py):

- The script prints one host a line, `HOST` or `HOST:SLOTS` (a bare HOST has
  --slots slots); blank lines are skipped. It runs every DISCOVERY_SECONDS; a
  non-zero exit or a bad line the first time ends the job (a misconfiguration),
  later it is a warning and the last answer stands.
- Order: hosts keep the place they had; new hosts go last, in the order the script
  printed them. So the oldest hosts hold the lowest ranks, and rank 0 stays on a
  host that has the state (see Note [Rank 0 survives] in elastic_driver.py).
- A host with a failed worker is blacklisted: no worker is placed on it again.
  With --blacklist-cooldown-range MIN MAX it is given another chance after a
  cooldown that doubles with each blacklisting, MIN * 2^n plus up to MIN at
  random, clamped to [MIN, MAX]; without, never.
"""

import random
import subprocess
import time

from . import names
from .common import UsageError, positive_int
from .hosts import HOST_NAME

DISCOVERY_SECONDS = 1.0
DISCOVERY_TIMEOUT_SECONDS = 60
COOLDOWN_LIMITS = (1, 3600)  # Horovod's bounds on --blacklist-cooldown-range


class DiscoveryError(Exception):
    """The discovery script failed or printed something that is not a host."""


def parse_discovery_output(text, default_slots, script="the discovery script"):
    """'a:4\\nb\\n' -> {'a': 4, 'b': default_slots}, in the order printed."""
    found = {}
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        name, sep, slots_text = line.partition(":")
        slots = positive_int(slots_text) if sep else default_slots
        if not HOST_NAME.match(name) or (sep and slots is None):
            raise DiscoveryError("%s printed %r: expected HOST or HOST:SLOTS (SLOTS a positive "
                                 "integer)" % (script, line))
        if slots is None:
            raise DiscoveryError("%s printed %r without slots: give --slots N, or print "
                                 "HOST:SLOTS" % (script, line))
        found[name] = slots
    return found


class DiscoveryScript:
    """Runs the script through the shell (it may be a command line) and parses it."""

    def __init__(self, script, default_slots):
        self.script, self.default_slots = script, default_slots

    def find(self):
        try:
            done = subprocess.run(self.script, shell=True, capture_output=True, text=True,
                                  timeout=DISCOVERY_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            raise DiscoveryError("discovery script %r did not finish in %d s" % (
                self.script, DISCOVERY_TIMEOUT_SECONDS))
        if done.returncode != 0:
            raise DiscoveryError("discovery script %r exited with status %d%s" % (
                self.script, done.returncode,
                (": " + done.stderr.strip().splitlines()[-1]) if done.stderr.strip() else ""))
        return parse_discovery_output(done.stdout, self.default_slots,
                                      "discovery script %r" % self.script)


class FixedHosts:
    """-H, --hostfile or the scheduler's allocation: the same hosts every time."""

    def __init__(self, hosts):
        self.hosts = dict(hosts)

    def find(self):
        return dict(self.hosts)


def check_cooldown_range(low, high):
    if not (COOLDOWN_LIMITS[0] <= low <= high <= COOLDOWN_LIMITS[1]):
        raise UsageError("--blacklist-cooldown-range %d %d: expected MIN MAX seconds with "
                         "%d <= MIN <= MAX <= %d" % ((low, high) + COOLDOWN_LIMITS))


class HostState:
    """One host's blacklisting: blacklisted since when, until when, how often."""

    def __init__(self, cooldown_range=None, rng=random.random):
        self.cooldown_range = cooldown_range
        self.blacklisted = False
        self.count = 0
        self.cooldown_end = 0.0
        self._rng = rng

    def blacklist(self, now):
        self.blacklisted = True
        if self.cooldown_range is None or self.cooldown_end > now:
            return
        low, high = self.cooldown_range
        self.count += 1
        delay = low * (1 << self.count) + self._rng() * low
        self.cooldown_end = now + max(low, min(high, delay))

    def whitelist(self):
        self.blacklisted = False
        self.cooldown_end = 0.0

    def resurrected(self, now):
        """Blacklisted, and its cooldown is over."""
        return self.cooldown_end > 0 and now >= self.cooldown_end


class HostManager:
    """The hosts discovery found, their order and their blacklisting. update() is
    given each discovery's answer; the driver's main thread is its only caller."""

    def __init__(self, cooldown_range=None, rng=random.random, clock=time.time):
        self._cooldown_range, self._rng, self._clock = cooldown_range, rng, clock
        self._states = {}
        self.host_slots = {}   # the last answer
        self.order = []        # assignment order of the hosts available then

    def state(self, host):
        if host not in self._states:
            self._states[host] = HostState(self._cooldown_range, self._rng)
        return self._states[host]

    def update(self, found):
        """Takes discovery's answer {host: slots}; returns what changed for the job,
        names.UPDATE_ADDED | names.UPDATE_REMOVED, 0 for nothing."""
        now = self._clock()
        back = [h for h in found if self.state(h).resurrected(now)]
        if found == self.host_slots and not back:
            return 0
        result = 0
        for host in self.host_slots:
            if host not in found:
                result |= names.UPDATE_REMOVED
        for host, slots in found.items():
            before = self.host_slots.get(host)
            if before is None or slots > before:
                result |= names.UPDATE_ADDED
            elif slots < before:
                result |= names.UPDATE_REMOVED
            elif host in back:
                result |= names.UPDATE_ADDED
        available = [h for h in found if not self.state(h).blacklisted or h in back]
        self.order = [h for h in self.order if h in available] + \
                     [h for h in available if h not in self.order]
        self.host_slots = dict(found)
        for host in back:
            self.state(host).whitelist()
        return result

    def current(self):
        """[(host, slots)] in assignment order, blacklisted hosts left out."""
        self.order = [h for h in self.order if not self.state(h).blacklisted]
        return [(h, self.host_slots[h]) for h in self.order]

    def blacklist(self, host):
        self.state(host).blacklist(self._clock())
        self.order = [h for h in self.order if h != host]

    def is_blacklisted(self, host):
        return self.state(host).blacklisted
