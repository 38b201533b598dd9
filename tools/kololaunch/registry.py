"""What each worker of one generation did: re-formed (READY), finished (SUCCESS) or
failed (FAILURE); and, once every worker has said, what the driver does next.

As Horovod's WorkerStateRegistry (horovod/runner/elastic/registration.py): a
generation ends when every worker assigned to it has recorded a state - the
survivors of a failure by asking to re-form, the failed ones by exiting - and then
decide() applies Horovod's rules in Horovod's order:

1. some worker finished (exit 0): the job is over;
2. every worker failed: the job failed;
3. the hosts of the failed workers are blacklisted;
4. every host of the generation is blacklisted: the job failed;
5. the job has re-formed --reset-limit times already: the job failed;
6. else the next generation is formed.

A FAILURE overrides an earlier READY (a worker that died while waiting to
re-form); anything else recorded twice keeps the first. Pure: no clock, no I/O.
"""

READY = "READY"
SUCCESS = "SUCCESS"
FAILURE = "FAILURE"


class Registry:
    """The states of the workers assigned to one generation (keys host:local_rank)."""

    def __init__(self, generation, keys):
        self.generation = generation
        self.expected = list(keys)
        self.states = {}
        self.first_record = None   # when the first state was recorded (driver's clock)
        self.first_trouble = None  # when the first READY or FAILURE was

    def record(self, key, state, now=None):
        """True if recorded; a key not of this generation, or recorded already (but
        READY then FAILURE), changes nothing."""
        if key not in self.expected:
            return False
        if key in self.states and not (state == FAILURE and self.states[key] == READY):
            return False
        self.states[key] = state
        if self.first_record is None:
            self.first_record = now
        if self.first_trouble is None and state != SUCCESS:
            self.first_trouble = now
        return True

    def complete(self):
        return len(self.states) == len(self.expected)

    def missing(self):
        return [k for k in self.expected if k not in self.states]

    def keys(self, state):
        return [k for k in self.expected if self.states.get(k) == state]


def decide(registry, host_of, is_blacklisted_after, resets, reset_limit):
    """(action, message, hosts to blacklist) for a complete generation; action is
    "finish", "fail" or "reform". host_of(key) names a worker's host;
    is_blacklisted_after(host, to_blacklist) says whether it is blacklisted once
    to_blacklist is."""
    g = registry.generation
    if registry.keys(SUCCESS):
        return "finish", None, []
    failed = registry.keys(FAILURE)
    if len(failed) == len(registry.expected):
        return "fail", "every worker of generation %d failed" % g, []
    bad_hosts = sorted({host_of(k) for k in failed})
    if all(is_blacklisted_after(host_of(k), bad_hosts) for k in registry.expected):
        return "fail", ("every host of generation %d has a failed worker (%s)"
                        % (g, ", ".join(bad_hosts))), bad_hosts
    if reset_limit is not None and resets >= reset_limit:
        return "fail", ("the job re-formed %d times, the --reset-limit; it ends at the "
                        "next failure or host change" % resets), bad_hosts
    return "reform", None, bad_hosts
