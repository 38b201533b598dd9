import os, sys, time, statistics
import torch, torch.distributed as dist
import kolo.torch.distributed as kd
kd.set_env_from_world()
dist.init_process_group(backend="kolo", init_method="env://")
gloo = dist.new_group(backend="gloo")
rank, size = dist.get_rank(), dist.get_world_size()
def t(fn, n):
    for _ in range(max(3, n // 10)): fn()
    ts = []
    for _ in range(n):
        dist.barrier(group=gloo)
        a = time.perf_counter(); fn(); ts.append(time.perf_counter() - a)
    return statistics.median(ts) * 1e6
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
