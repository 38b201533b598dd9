import time, statistics, torch, torch.distributed as dist
import kolo.torch.distributed as kd
from kolo.torch.distributed import _kolo_calls as calls
kd.set_env_from_world()
dist.init_process_group(backend="kolo", init_method="env://")
gloo = dist.new_group(backend="gloo")
rank, size = dist.get_rank(), dist.get_world_size()
x = torch.full((1024,), float(rank)); out = torch.empty(2048)
def t(fn, n=300, barrier=True):
    for _ in range(30): fn()
    ts = []
    for _ in range(n):
        if barrier: dist.barrier(group=gloo)
        a = time.perf_counter(); fn(); ts.append(time.perf_counter() - a)
    return statistics.median(ts) * 1e6
i = [0]
def raw():
    i[0] += 1
    calls.allgather_into(x.reshape(1, -1), out, "raw.%d" % (i[0] % 2), 0).wait()
pg = dist.distributed_c10d._get_default_group()
for rnd in range(2):
    r = dict(
      c10d_barrier=t(lambda: dist.all_gather_into_tensor(out, x)),
      c10d_nobarrier=t(lambda: dist.all_gather_into_tensor(out, x), barrier=False),
      raw_barrier=t(raw),
      raw_nobarrier=t(raw, barrier=False),
      gloo_barrier_only=t(lambda: None),
    )
    if rank == 0: print(" ".join("%s %.1f" % kv for kv in r.items()), flush=True)
dist.destroy_process_group()
