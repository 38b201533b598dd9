#!/usr/bin/python3
"""A PyTorch worker for kolorun --elastic over kolo's real socket world: a linear
model trained with kolo.torch's DistributedOptimizer under hvd.elastic.run, its
TorchState committed every epoch. Prints one JSON line per finished epoch and, at
the end, a digest of its model and optimizer state (equal on every rank when the
ranks agree bit for bit).

usage: elastic_torch_worker.py EPOCHS [kill=GEN:RANK:EPOCH] [grow=FILE:TEXT:EPOCH]
  kill  at that point the rank SIGKILLs itself mid-batch; the time goes to
        FILE=died_at beside the hosts file or in the working directory
  grow  rank 0 of generation 0 writes TEXT (',' for newlines) to FILE, a discovery
        script's source, at the end of EPOCH, and waits for the driver to see it
"""

import hashlib
import json
import os
import signal
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


def main():
    epochs = int(sys.argv[1])
    opts = dict(a.split("=", 1) for a in sys.argv[2:])
    kill = tuple(int(x) for x in opts["kill"].split(":")) if "kill" in opts else None
    grow = None
    if "grow" in opts:
        path, rest = opts["grow"].split(":", 1)
        grow = [path] + rest.rsplit(":", 1)
    hvd.init()
    torch.manual_seed(hvd.rank())  # every rank different until the first sync
    model = torch.nn.Linear(16, 4)
    optimizer = hvd.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9),
        named_parameters=model.named_parameters())
    state = hvd.elastic.TorchState(model, optimizer, epoch=0)
    resets = [0]
    state.register_reset_callbacks([lambda: resets.__setitem__(0, resets[0] + 1)])
    generation = lambda: int(os.environ["KOLO_GENERATION"])  # noqa: E731

    @hvd.elastic.run
    def train(state):
        while state.epoch < epochs:
            for step in range(8):
                if kill == (generation(), hvd.rank(), state.epoch) and step == 3:
                    with open("died_at", "w") as f:
                        f.write(repr(time.time()))
                    os.kill(os.getpid(), signal.SIGKILL)
                optimizer.zero_grad()
                model(torch.randn(32, 16)).pow(2).mean().backward()
                optimizer.step()
            if grow and generation() == 0 and hvd.rank() == 0 and state.epoch == int(grow[2]):
                with open(grow[0], "w") as f:
                    f.write(grow[1].replace(",", "\n") + "\n")
                while not _job.current().hosts_updated()[0]:
                    time.sleep(0.05)
            say({"epoch": state.epoch, "generation": generation(), "rank": hvd.rank(),
                 "size": hvd.size(), "resets": resets[0], "time": time.time()})
            state.epoch += 1
            state.commit()

    train(state)
    say({"digest": digest(model, optimizer), "rank": hvd.rank()})


if __name__ == "__main__":
    main()
