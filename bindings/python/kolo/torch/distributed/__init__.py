"""torch.distributed backend "kolo": ``import kolo.torch.distributed`` registers it.

    import kolo.torch.distributed  # noqa: F401 (registers backend "kolo")
    import torch.distributed as dist
    dist.init_process_group(backend="kolo", init_method="env://")
    model = torch.nn.parallel.DistributedDataParallel(model)

Every collective c10d calls runs on kolo (negotiation by name, fusion, the
shared-memory engine, stall diagnosis, failure detection): _process_group.py has
the table of which kolo call serves each (send and recv included, over a kolo
set for each pair of ranks). CPU tensors. Today kolo's world is the
MPI job, so every rank must run under ``mpiexec`` (or kolorun) with RANK and
WORLD_SIZE equal to its MPI rank and size; torch's store is used for c10d's own
barriers only. ``new_group`` maps to kolo process sets. Tested with torch 1.13.
"""

import os
import socket

import numpy as np
import torch.distributed as dist

from ... import _core, _numpy_ops
from . import _groups
from ._process_group import ProcessGroupKolo, create
from ._work import KoloWork

BACKEND_NAME = "kolo"


def _register():
    _groups.install()
    if "KOLO" not in getattr(dist.Backend, "_plugins", {}):
        dist.Backend.register_backend(BACKEND_NAME, create)


def set_env_from_world():
    """Under mpiexec or kolorun: sets RANK, WORLD_SIZE, LOCAL_RANK and, unless set,
    MASTER_ADDR (rank 0's host name) and MASTER_PORT (a port free on rank 0) from
    kolo's world, starting kolo if needed, so that
    ``init_process_group(backend="kolo", init_method="env://")`` finds them.
    Collective: every rank calls it."""
    if not _core.is_initialized():
        _core.init()
    rank = _core.rank()
    host = np.zeros(256, np.uint8)
    port = np.zeros(1, np.int64)
    if rank == 0:
        name = socket.gethostname().encode()[:255]
        host[:len(name)] = np.frombuffer(name, np.uint8)
        with socket.socket() as s:
            s.bind(("", 0))
            port[0] = s.getsockname()[1]
    host = _numpy_ops.broadcast(host, 0, name="kolo.c10d.env.host")
    port = _numpy_ops.broadcast(port, 0, name="kolo.c10d.env.port")
    os.environ["RANK"] = str(rank)
    os.environ["WORLD_SIZE"] = str(_core.size())
    os.environ["LOCAL_RANK"] = str(_core.local_rank())
    os.environ.setdefault("MASTER_ADDR", bytes(host).rstrip(b"\0").decode())
    os.environ.setdefault("MASTER_PORT", str(int(port[0])))


_register()

__all__ = ["BACKEND_NAME", "KoloWork", "ProcessGroupKolo", "set_env_from_world"]
