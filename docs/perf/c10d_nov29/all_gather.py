"""c10d timing (docs/pytorch.md, "Synchronous calls and `all_gather` into a list");
run under mpiexec.mpich -n 2 -bind-to core."""
import torch
import torch.distributed as dist

from timing import gloo, rank, size, t

for numel in [1024, 16384, 262144, 1 << 20, 4 << 20]:
    x = torch.full((numel,), float(rank))
    out = torch.empty(numel * size)
    outs = [torch.empty(numel) for _ in range(size)]
    n = 200 if numel <= 262144 else 40
    rows = []
    for rnd in range(3):
        k_into = t(lambda: dist.all_gather_into_tensor(out, x), n)
        k_list = t(lambda: dist.all_gather(outs, x), n)
        g_into = t(lambda: dist.all_gather(outs, x, group=gloo), n)
        rows.append((k_into, k_list, g_into))
    assert torch.equal(out, torch.arange(size).repeat_interleave(numel).float())
    if rank == 0:
        print(f"{numel*4:>9} B/rank  kolo into {' '.join('%.1f'%r[0] for r in rows)}  kolo list {' '.join('%.1f'%r[1] for r in rows)}  gloo list {' '.join('%.1f'%r[2] for r in rows)} us", flush=True)
dist.destroy_process_group()
