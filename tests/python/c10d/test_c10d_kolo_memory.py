"""kolo.torch.use_kolo_memory() (issue 30's speed, docs/pytorch.md): CPU tensors of
1 MiB and up from kolo_alloc memory, so that kolo reduces DDP's buckets from the
peers' buffers in place. A DDP model with buckets over 1 MiB trained on backend
"kolo" ends bit-identical on every rank and close to the same training on gloo;
bad thresholds are refused. Last in this folder: the allocator stays for the rest
of the process."""

import copy

import pytest
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import c10d_setup
import kolo.torch
from test_c10d_ddp import check_same_everywhere_and_like_gloo


@pytest.fixture(scope="module")
def pgs():
    return c10d_setup.groups()


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "1M"])
def test_bad_thresholds_are_refused(bad):
    with pytest.raises(ValueError, match="min_bytes"):
        kolo.torch.use_kolo_memory(bad)


class Wide(torch.nn.Module):
    """Weights of 1 and 2 MiB, so that DDP's buckets pass kolo's in-place threshold."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(256, 1024)
        self.b = torch.nn.Linear(1024, 512)
        self.c = torch.nn.Linear(512, 4)

    def forward(self, x):
        return self.c(torch.relu(self.b(torch.relu(self.a(x)))))


def test_ddp_on_kolo_memory_matches_gloo(pgs):
    kolo.torch.use_kolo_memory()
    torch.manual_seed(5 + dist.get_rank())
    net_kolo = Wide()
    net_gloo = copy.deepcopy(net_kolo)
    kolo_ddp = DDP(net_kolo, bucket_cap_mb=1.5)
    gloo_ddp = DDP(net_gloo, process_group=pgs[1], bucket_cap_mb=1.5)
    live, _ = kolo.torch.kolo_memory_stats()
    assert live >= 2 * (1 << 20), "the buckets are not in kolo memory"
    for ddp in (kolo_ddp, gloo_ddp):
        opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
        for step in range(3):
            g = torch.Generator().manual_seed(10 * step + dist.get_rank())
            x, y = torch.randn(16, 256, generator=g), torch.randn(16, 4, generator=g)
            torch.nn.functional.mse_loss(ddp(x), y).backward()
            opt.step()
            opt.zero_grad()
    check_same_everywhere_and_like_gloo(net_kolo, net_gloo, tol=1e-5)


def test_collectives_on_kolo_memory_are_exact(pgs):
    """Allgather, broadcast, alltoall and reduce_scatter of 2 MiB tensors a rank,
    each from kolo memory on every rank (so the shm engine reads the peers'
    buffers mapped: Note [The peers' sources in kolo memory]), give exact results."""
    kolo.torch.use_kolo_memory()
    rank, size = dist.get_rank(), dist.get_world_size()
    n = 1 << 19  # int32: 2 MiB

    def rows(r, salt):
        return torch.arange(n, dtype=torch.int32) % 1013 + 100003 * r + 7 * salt

    live_before, _ = kolo.torch.kolo_memory_stats()
    mine = rows(rank, 1)
    outs = [torch.empty(n, dtype=torch.int32) for _ in range(size)]
    live, _ = kolo.torch.kolo_memory_stats()
    assert live >= live_before + (size + 1) * n * 4, "the tensors are not in kolo memory"
    dist.all_gather(outs, mine)
    for r in range(size):
        assert torch.equal(outs[r], rows(r, 1)), "allgather block %d" % r

    buf = rows(size - 1, 2) if rank == size - 1 else torch.zeros(n, dtype=torch.int32)
    dist.broadcast(buf, src=size - 1)
    assert torch.equal(buf, rows(size - 1, 2)), "broadcast"

    send = torch.cat([rows(rank, 3 + d) for d in range(size)])
    got = torch.empty_like(send)
    dist.all_to_all_single(got, send)
    want = torch.cat([rows(s, 3 + rank) for s in range(size)])
    assert torch.equal(got, want), "alltoall"

    shard = torch.empty(n, dtype=torch.int32)
    dist.reduce_scatter(shard, [rows(rank, 10 + d) for d in range(size)])
    assert torch.equal(shard, sum(rows(s, 10 + rank) for s in range(size))), "reduce_scatter"
