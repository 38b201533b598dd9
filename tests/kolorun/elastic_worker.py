#!/usr/bin/python3
"""A worker for kolorun --elastic's tests: a training loop under kolo.elastic.run
over a pretend world (below), so that what the tests see is the driver's doing:
who is in each generation, with which rank, and how often the job re-formed.

The pretend world has no collectives (kolo's socket world re-forms in process
only with issue 31's C side): its "step" fails with HorovodInternalError once
the driver's generation has a worker that left (as a real collective would fail
once a peer died), and its broadcast goes through files beside LOG (rank 0
writes the n-th broadcast of a generation, the others read it). Re-forming goes
through kolo.elastic's own Job, the driver's service and the environment, as in
a real job.

usage: elastic_worker.py LOG EPOCHS STEPS [ACTION...]
  LOG      a file each rank appends a JSON line to at each epoch's end:
           {"slot", "generation", "rank", "size", "epoch", "resets", "env"}
  ACTION   GEN:RANK:EPOCH:STEP:WHAT - at that point (EPOCH = EPOCHS, STEP 0:
           after training), the rank does WHAT:
           exitN (exit with status N), kill (SIGKILL itself), stop (SIGSTOP
           itself), sleepS (sleep S seconds), raise (a RuntimeError: not elastic's to catch),
           hosts=FILE=TEXT (writes TEXT, ',' for newlines, to FILE: a
           discovery script's source), await-update (until the driver has
           a host update for this generation)
"""

import json
import os
import pickle
import signal
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bindings", "python"))

from kolo.elastic import _job, _run, _state  # noqa: E402
from kolo.exceptions import HorovodInternalError  # noqa: E402

STEP_SECONDS = 0.05


class PretendWorld:
    """The seam (kolo/elastic/_world.py) without libkolo: ranks from the environment."""

    def rank(self):
        return int(os.environ["RANK"])

    def size(self):
        return int(os.environ["WORLD_SIZE"])

    def shutdown(self):
        pass

    def init(self):
        pass

    def reform(self, env):
        os.environ.update({k: str(v) for k, v in env.items()})


class FileBroadcast:
    """bcast_object for the pretend world: the n-th call of a generation is the
    file bcast.GEN.N in `folder`, written by rank 0; each other rank acknowledges
    it (bcast.GEN.N.RANK), and once all have, rank 0 writes bcast.GEN.N.done,
    which the others wait for: every rank leaves a broadcast only when every
    rank has reached it, or fails with HorovodInternalError when one left the
    generation instead (a real collective would)."""

    def __init__(self, folder, job, world):
        self.folder, self.job, self.world = folder, job, world
        self.calls = {}

    def __call__(self, obj):
        g = self.job.generation
        n = self.calls[g] = self.calls.get(g, -1) + 1
        path = os.path.join(self.folder, "bcast.%d.%d" % (g, n))
        if self.world.rank() == 0:
            with open(path + ".tmp", "wb") as f:
                pickle.dump(obj, f)
            os.replace(path + ".tmp", path)
            self.await_acks(path)
            open(path + ".done", "w").close()
            return obj
        while not os.path.exists(path):
            step(self.job, 0.01)
        with open(path, "rb") as f:
            obj = pickle.load(f)
        open("%s.%d" % (path, self.world.rank()), "w").close()
        while not os.path.exists(path + ".done"):
            try:
                step(self.job, 0.01)
            except HorovodInternalError:
                # Rank 0 may have written .done just after the check above, and
                # the generation broken after that (a removed host's workers
                # leaving): every rank reached this broadcast, so it succeeded.
                if not os.path.exists(path + ".done"):
                    raise
        return obj


    def await_acks(self, path):
        """Until every other rank read the broadcast; HorovodInternalError if one of
        those that have not left the generation (a real broadcast fails then)."""
        while True:
            missing = {r for r in range(1, self.world.size())
                       if not os.path.exists("%s.%d" % (path, r))}
            if not missing:
                return
            status = self.job.driver.status()
            gone = {status["assignment"].get(k) for k in status["states"]}
            if status["generation"] != self.job.generation or gone & missing:
                raise HorovodInternalError("pretend: generation %d broke" % self.job.generation)
            time.sleep(0.01)


def step(job, seconds=STEP_SECONDS):
    """A pretend collective: fails once this generation lost a worker."""
    status = job.driver.status()
    if status["generation"] != job.generation or status["states"]:
        raise HorovodInternalError("pretend: generation %d broke" % job.generation)
    time.sleep(seconds)


def act(what, job):
    if what.startswith("exit"):
        os._exit(int(what[4:]))
    if what == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    if what == "stop":
        os.kill(os.getpid(), signal.SIGSTOP)
    if what.startswith("sleep"):
        time.sleep(float(what[5:]))
        return
    if what == "raise":
        raise RuntimeError("pretend: a bug in the training script")
    if what == "await-update":
        deadline = time.monotonic() + 30
        while not job.hosts_updated()[0] and time.monotonic() < deadline:
            time.sleep(0.05)
        return
    if what.startswith("hosts="):
        _, path, text = what.split("=", 2)
        with open(path + ".tmp", "w") as f:
            f.write(text.replace(",", "\n") + "\n")
        os.replace(path + ".tmp", path)


def main():
    log, epochs, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    actions = {}
    for spec in sys.argv[4:]:
        g, r, e, s, what = spec.split(":", 4)
        actions.setdefault((int(g), int(r), int(e), int(s)), []).append(what)
    world = PretendWorld()
    job = _job.Job(world=world)
    _job.use(job)
    resets = [0]
    bcast = FileBroadcast(os.path.dirname(os.path.abspath(log)), job, world)
    state = _state.ObjectState(bcast_object=bcast, get_rank=world.rank, epoch=0)
    state.register_reset_callbacks([lambda: resets.__setitem__(0, resets[0] + 1)])

    @_run.run
    def train(state):
        while state.epoch < epochs:
            for s in range(steps):
                for what in actions.pop((job.generation, world.rank(), state.epoch, s), []):
                    act(what, job)
                step(job)
            bcast(None)  # the epoch's last collective: every rank finished it
            with open(log, "a") as f:
                f.write(json.dumps({"slot": job.slot, "generation": job.generation,
                                    "rank": world.rank(), "size": world.size(),
                                    "epoch": state.epoch, "resets": resets[0]}) + "\n")
            state.epoch += 1
            state.commit()

    train(state)
    for what in actions.pop((job.generation, world.rank(), epochs, 0), []):
        act(what, job)  # after training: EPOCH = EPOCHS


if __name__ == "__main__":
    main()
