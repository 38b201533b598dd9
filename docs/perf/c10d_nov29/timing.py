"""What the c10d timing scripts here share: backend "kolo" started from the MPI
job (mpiexec), a gloo group of the same ranks, and t(fn, n): the median of n
timed calls of fn in µs, each after a gloo barrier, after a tenth as many
untimed ones."""
import statistics
import time

import torch.distributed as dist
import kolo.torch.distributed as kd

kd.set_env_from_world()
dist.init_process_group(backend="kolo", init_method="env://")
gloo = dist.new_group(backend="gloo")
rank, size = dist.get_rank(), dist.get_world_size()


def t(fn, n):
    for _ in range(max(3, n // 10)):
        fn()
    ts = []
    for _ in range(n):
        dist.barrier(group=gloo)
        a = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - a)
    return statistics.median(ts) * 1e6
