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
