"""kolo.torch.init(process_sets=[...]) registers the sets on every rank (run under
mpiexec -n 3): ids in order, the members' ops reduce within their set."""

import sys

import torch

import kolo.torch as hvd

even = hvd.ProcessSet([0, 2])
hvd.init(process_sets=[even, [0, 1]])
rank = hvd.rank()
assert even.process_set_id == 1, even
assert even.included() == (rank != 1)
if even.included():
    out = hvd.allreduce(torch.tensor([rank + 1]), op=hvd.Sum, name="x", process_set=even)
    assert out.tolist() == [4], out
hvd.barrier()
hvd.shutdown()
print("rank %d: ok" % rank)
sys.exit(0)
