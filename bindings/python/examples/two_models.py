#!/usr/bin/python3
"""Two models trained side by side in one job, each data-parallel within its own
process set (Horovod's process sets, through kolo.torch):

    mpiexec.mpich -n 4 /usr/bin/python3 bindings/python/examples/two_models.py

Ranks 0 and 2 fit one linear regression (y = 3x + 1), ranks 1 and 3 another
(y = -2x + 5). Each set's DistributedOptimizer averages gradients over its own two
ranks only, its own broadcast_parameters starts it from its root's weights, and the
two sets negotiate independently: neither waits for the other's steps. At the end
every rank checks that its set's members hold bit-identical weights (an
allgather_object within the set) and that the fit found its own line.
"""

import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import kolo.torch as hvd  # noqa: E402

LINES = {0: (3.0, 1.0), 1: (-2.0, 5.0)}  # set index -> (slope, intercept)


def main():
    sets = [hvd.ProcessSet([0, 2]), hvd.ProcessSet([1, 3])]
    hvd.init(process_sets=sets)
    if hvd.size() != 4:
        sys.exit("two_models.py runs on 4 ranks (mpiexec.mpich -n 4)")
    which = 0 if sets[0].included() else 1
    mine = sets[which]
    slope, intercept = LINES[which]
    torch.manual_seed(100 + hvd.rank())  # different starts: the broadcast makes them equal
    model = torch.nn.Linear(1, 1)
    hvd.broadcast_parameters(model.state_dict(), root_rank=mine.ranks[0], process_set=mine)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters(), process_set=mine)
    gen = torch.Generator().manual_seed(hvd.rank())  # each rank its own shard of data
    for step in range(300):
        x = torch.rand(32, 1, generator=gen) * 2 - 1
        loss = ((model(x) - (slope * x + intercept)) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    weights = [model.weight.item(), model.bias.item()]
    everyone = hvd.allgather_object(weights, name="weights", process_set=mine)
    assert all(w == weights for w in everyone), everyone
    assert abs(weights[0] - slope) < 1e-2 and abs(weights[1] - intercept) < 1e-2, weights
    print("rank %d, set %s: y = %.4f x + %.4f after 300 steps, same on %d ranks" % (
        hvd.rank(), mine.ranks, weights[0], weights[1], len(everyone)))
    # One rank's shutdown stops kolo on every rank, sets included: wait for the other
    # set to finish first.
    hvd.barrier()
    hvd.shutdown()


if __name__ == "__main__":
    main()
