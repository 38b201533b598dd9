"""c10d timing (docs/pytorch.md, "Synchronous calls and `all_gather` into a list");
run under mpiexec.mpich -n 2 -bind-to core."""
import torch
import torch.distributed as dist

from timing import gloo, rank, size, t

for numel in [1024, 262144, 1 << 20, 4 << 20]:
    x = torch.arange(numel * size, dtype=torch.float32) + rank
    out = torch.empty(numel * size)
    n = 200 if numel <= 262144 else 40
    rows = [(t(lambda: dist.all_to_all_single(out, x), n),
             t(lambda: dist.all_to_all_single(out, x, group=gloo), n)) for _ in range(3)]
    if rank == 0:
        print(f"{numel*4*size:>9} B/rank in  kolo {' '.join('%.1f'%r[0] for r in rows)}  gloo {' '.join('%.1f'%r[1] for r in rows)} us", flush=True)
dist.destroy_process_group()
