#!/usr/bin/python3
"""A PyTorch worker for kolorun --elastic over kolo's real socket world: a linear
model trained with kolo.torch's DistributedOptimizer under hvd.elastic.run, its
TorchState committed every epoch. Prints one JSON line per finished epoch, one
when a generation after the first finished its first step on this rank
("resumed"), and, at the end, a digest of its model and optimizer state (equal on
every rank when the ranks agree bit for bit).

usage: elastic_torch_worker.py EPOCHS [steps=N] [step_seconds=S] [ACTION...]
  ACTION  GEN:RANKS:EPOCH:STEP:WHAT - at that step of that epoch of generation GEN,
          each rank in RANKS ('+'-separated) does WHAT:
          kill         SIGKILL itself (the time goes to the file died_at.RANK)
          raise        a RuntimeError (not elastic's to catch: the worker fails)
          exitN        exit with status N
          stopS        SIGSTOP itself for S seconds (a child sends SIGCONT)
          grow=FILE=TEXT   write TEXT (',' for newlines) to FILE, a discovery
                       script's source, and wait until the driver has seen it
  Every worker writes its pid to pid.PID (with its generation and rank) when a
  generation starts, for tests that kill from outside. These files go to
  ELASTIC_WORKER_DIR when set (workers on pretend hosts), else the working directory.
"""

import hashlib
import json
import os
import signal
import subprocess
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bindings", "python"))
import kolo.torch as hvd  # noqa: E402
from kolo.elastic import _job  # noqa: E402


def say(record):
    """One JSON line in one write: the ranks share kolorun's stdout, and print() under
    PYTHONUNBUFFERED writes the text and its newline apart."""
    sys.stdout.write(json.dumps(record) + "\n")
    sys.stdout.flush()


def digest(model, optimizer):
    tensors = [p.detach().reshape(-1) for p in model.parameters()]
    tensors += [s["momentum_buffer"].reshape(-1) for s in optimizer.state.values()]
    return hashlib.sha256(torch.cat(tensors).numpy().tobytes()).hexdigest()[:16]


def here(name):
    return os.path.join(os.environ.get("ELASTIC_WORKER_DIR", "."), name)


def generation():
    return int(os.environ["KOLO_GENERATION"])


def act(what):
    if what == "kill":
        with open(here("died_at.%d" % hvd.rank()), "w") as f:
            f.write(repr(time.time()))
        os.kill(os.getpid(), signal.SIGKILL)
    elif what == "raise":
        raise RuntimeError("elastic_torch_worker: a bug in the training script")
    elif what.startswith("exit"):
        sys.stdout.flush()
        os._exit(int(what[4:]))
    elif what.startswith("stop"):
        subprocess.Popen(["sh", "-c", "sleep %s; kill -CONT %d" % (what[4:], os.getpid())])
        os.kill(os.getpid(), signal.SIGSTOP)
    elif what.startswith("grow="):
        _, path, text = what.split("=", 2)
        with open(path + ".tmp", "w") as f:
            f.write(text.replace(",", "\n") + "\n")
        os.replace(path + ".tmp", path)
        while not _job.current().hosts_updated()[0]:
            time.sleep(0.05)
    else:
        raise SystemExit("elastic_torch_worker: unknown action %r" % what)


def parse(argv):
    options, actions = {"steps": "8", "step_seconds": "0"}, {}
    for arg in argv:
        if arg.split("=", 1)[0] in options:
            key, value = arg.split("=", 1)
            options[key] = value
            continue
        g, ranks, e, s, what = arg.split(":", 4)
        for r in ranks.split("+"):
            actions.setdefault((int(g), int(r), int(e), int(s)), []).append(what)
    return int(options["steps"]), float(options["step_seconds"]), actions


def main():
    epochs = int(sys.argv[1])
    steps, step_seconds, actions = parse(sys.argv[2:])
    hvd.init()
    torch.manual_seed(hvd.rank())  # every rank different until the first sync
    model = torch.nn.Linear(16, 4)
    optimizer = hvd.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9),
        named_parameters=model.named_parameters())
    state = hvd.elastic.TorchState(model, optimizer, epoch=0)
    resets = [0]
    state.register_reset_callbacks([lambda: resets.__setitem__(0, resets[0] + 1)])
    started = [None]  # the generation whose first step this rank has done

    def note_pid():
        with open(here("pid.%d" % os.getpid()), "w") as f:
            f.write("%d %d\n" % (generation(), hvd.rank()))

    @hvd.elastic.run
    def train(state):
        note_pid()
        while state.epoch < epochs:
            for step in range(steps):
                for what in actions.pop((generation(), hvd.rank(), state.epoch, step), []):
                    act(what)
                optimizer.zero_grad()
                model(torch.randn(32, 16)).pow(2).mean().backward()
                optimizer.step()
                if started[0] != generation():
                    started[0] = generation()
                    if generation() > 0:
                        say({"resumed": time.time(), "generation": generation(),
                             "rank": hvd.rank()})
                if step_seconds:
                    time.sleep(step_seconds)
            say({"epoch": state.epoch, "generation": generation(), "rank": hvd.rank(),
                 "size": hvd.size(), "resets": resets[0], "time": time.time()})
            state.epoch += 1
            state.commit()

    train(state)
    say({"digest": digest(model, optimizer), "rank": hvd.rank(), "generation": generation(),
         "size": hvd.size()})


if __name__ == "__main__":
    main()
