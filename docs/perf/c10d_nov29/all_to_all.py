import time, statistics, torch, torch.distributed as dist
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
for numel in [1024, 262144, 1 << 20, 4 << 20]:
    x = torch.arange(numel * size, dtype=torch.float32) + rank
    out = torch.empty(numel * size)
    n = 200 if numel <= 262144 else 40
    rows = [(t(lambda: dist.all_to_all_single(out, x), n),
             t(lambda: dist.all_to_all_single(out, x, group=gloo), n)) for _ in range(3)]
    if rank == 0:
        print(f"{numel*4*size:>9} B/rank in  kolo {' '.join('%.1f'%r[0] for r in rows)}  gloo {' '.join('%.1f'%r[1] for r in rows)} us", flush=True)
dist.destroy_process_group()
