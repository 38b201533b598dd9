"""The torch.distributed setup the c10d tests share (imported by them; pytest runs
every test module of tests/python in one process per rank, under mpiexec): the
default group on backend "kolo" from kolo's world (kolo.torch.distributed's
set_env_from_world), and one gloo group over every rank to compare with."""

import torch.distributed as dist

import kolo.torch.distributed as kolo_dist

_gloo = []


def groups():
    """(the default kolo group, a gloo group over every rank), made once."""
    if not dist.is_initialized():
        kolo_dist.set_env_from_world()
        dist.init_process_group(backend="kolo", init_method="env://")
        _gloo.append(dist.new_group(backend="gloo"))
    return dist.distributed_c10d._get_default_group(), _gloo[0]
