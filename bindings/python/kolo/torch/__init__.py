"""kolo.torch: horovod.torch's API over kolo, for CPU tensors (and CUDA tensors when
libkolo has the NCCL transport).

An existing Horovod PyTorch script runs by changing its import:

    import kolo.torch as hvd
    hvd.init()
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)

Errors are Horovod's types: a collective that fails (e.g. ranks disagree on a
tensor) raises HorovodInternalError, a RuntimeError, on every rank; a bad argument
raises ValueError.
"""

from .. import _core, build_info
from .._core import (Adasum, Average, Max, Min, Product, Sum, cross_rank, cross_size,
                     is_initialized, local_rank, local_size, rank, shutdown, size)
from .._process_sets import add_process_set, remove_process_set
from ..elastic._run import first_init
from ..exceptions import (CollectiveRefusedError, DuplicateNameError, HorovodInternalError,
                          HostsUpdatedInterrupt, KoloError, MismatchError, NotInitializedError,
                          RankFailedError, ShutdownError, StalledError, UnsupportedError)
from . import elastic
from .compression import Compression
from .functions import (allgather_object, broadcast_object, broadcast_optimizer_state,
                        broadcast_parameters)
from .mpi_ops import (HorovodAllgather, HorovodAllreduce, HorovodAlltoall, HorovodBroadcast,
                      HorovodGroupedAllgather, HorovodGroupedAllreduce,
                      HorovodGroupedReducescatter, HorovodReducescatter, ProcessSet, allgather,
                      allgather_async, allreduce, allreduce_, allreduce_async, allreduce_async_,
                      alltoall, alltoall_async, barrier, broadcast, broadcast_, broadcast_async,
                      broadcast_async_, global_process_set, grouped_allgather,
                      grouped_allgather_async, grouped_allreduce,
                      grouped_allreduce_, grouped_allreduce_async, grouped_allreduce_async_,
                      grouped_reducescatter, grouped_reducescatter_async,
                      join, poll, reducescatter, reducescatter_async, synchronize)
from .memory import kolo_memory_stats, use_kolo_memory
from .optimizer import DistributedOptimizer
from .sparse import sparse_allreduce_async


def init(comm=None, process_sets=None):
    """Starts kolo (collective). `comm`: an mpi4py communicator or Fortran handle;
    `process_sets`: ProcessSet objects (or lists of ranks) to register, on every rank.
    In an elastic job, a generation that breaks while this worker joins it is
    followed to the next one (kolo.elastic's first_init)."""
    first_init(lambda: _core.init(comm, process_sets))


# ---- capability queries (Horovod's names and return types) -----------------------
# All return bools, except nccl_built(): the NCCL version kolo was compiled with as
# an int (NCCL_VERSION_CODE, e.g. 22809 for 2.28.9), 0 without NCCL - Horovod
# programs compare it with numbers (`if hvd.nccl_built() >= 2700`).

def mpi_built():
    return bool(_core.transport_built("mpi")[0])


def mpi_enabled():
    """kolo always runs over MPI once initialised."""
    return mpi_built() and is_initialized()


def mpi_threads_supported():
    """kolo asks MPI for MPI_THREAD_MULTIPLE when it initialises MPI. Like Horovod,
    raises ValueError before init()."""
    _core.require_initialized("mpi_threads_supported")
    return True


def nccl_built():
    """NCCL_VERSION_CODE of the NCCL headers kolo was built with, or 0."""
    if not _core.transport_built("nccl")[0]:
        return 0
    return _nccl_version_code(build_info()["build"].get("nccl_headers", ""))


def _nccl_version_code(text):
    """"2.28.9" -> 22809 (NCCL's encoding: major*10000 + minor*100 + patch since 2.9,
    major*1000 + minor*100 + patch before)."""
    try:
        major, minor, patch = (int(p) for p in text.split(".")[:3])
    except ValueError:
        return 1  # built, version unreadable: still true in a boolean test
    scale = 10000 if (major, minor) >= (2, 9) else 1000
    return major * scale + minor * 100 + patch


def cuda_built():
    """kolo's CUDA support comes with its NCCL transport."""
    return nccl_built() != 0


def gloo_built():
    return False


def gloo_enabled():
    return False


def rocm_built():
    return False


def ddl_built():
    return False


def ccl_built():
    return False


def is_homogeneous():
    return True


def start_timeline(file_path, mark_cycles=False):
    """Horovod's hvd.start_timeline: starts recording a Chrome-trace timeline to
    ``file_path`` (rank 0 writes a plain path; ``%r`` or a directory gives every
    rank its own file; see kolo.start_timeline)."""
    _core.start_timeline(file_path, mark_cycles)


def stop_timeline():
    """Horovod's hvd.stop_timeline: ends the timeline; the file is valid JSON after."""
    _core.stop_timeline()
