"""kolo: collective communication for data-parallel training, from Python.

The package calls libkolo's C API (include/kolo/kolo.h) through ctypes: there is no
compiled extension, so it does not depend on any framework's C++ ABI. This module
is the framework-neutral API on NumPy arrays; ``kolo.torch`` is a drop-in for
``horovod.torch``.

    import numpy as np, kolo
    kolo.init()
    total = kolo.allreduce(np.ones(4, np.float32), op=kolo.Sum)   # == size()
    kolo.shutdown()

libkolo is found through ``KOLO_LIBRARY``, the build tree, or an install prefix
(see ``kolo._lib``); ``kolo.library_path()`` says which file was loaded.
"""

import json

from . import _lib, elastic
from ._core import (Adasum, Average, Handle, Max, Min, Product, Sum, barrier, cross_rank,
                    cross_size, init, is_initialized, join, local_rank, local_size, rank,
                    shutdown, size, start_timeline, stop_timeline, transport_built, version)
from ._numpy_ops import (allgather, allgather_async, allreduce, allreduce_async, alltoall,
                         alltoall_async, broadcast, broadcast_async, grouped_allgather,
                         grouped_allgather_async, grouped_allreduce, grouped_allreduce_async,
                         grouped_reducescatter, grouped_reducescatter_async, poll,
                         reducescatter, reducescatter_async, synchronize)
from ._process_sets import ProcessSet, add_process_set, global_process_set, remove_process_set
from .exceptions import (CollectiveRefusedError, DuplicateNameError, HorovodInternalError,
                         HostsUpdatedInterrupt, KoloError, KoloTimeoutError, KoloTypeError,
                         KoloValueError, LibraryNotFoundError, MismatchError,
                         NotInitializedError, RankFailedError, ShutdownError, StalledError,
                         TransportError, UnsupportedError)

__version__ = "0.1.0"


def library_path():
    """The libkolo file this process loaded (loading it if needed)."""
    return _lib.load().path


def build_info():
    """libkolo's build and configuration, as a dict (kolo_build_info_json)."""
    return json.loads(_lib.load().kolo_build_info_json().decode())


__all__ = [
    "Adasum", "Average", "Handle", "Max", "Min", "Product", "ProcessSet", "Sum",
    "add_process_set", "global_process_set", "remove_process_set",
    "allgather", "allgather_async", "allreduce", "allreduce_async", "alltoall",
    "alltoall_async", "barrier", "broadcast", "broadcast_async", "build_info", "cross_rank",
    "cross_size", "grouped_allgather", "grouped_allgather_async", "grouped_allreduce",
    "grouped_allreduce_async", "grouped_reducescatter", "grouped_reducescatter_async", "init",
    "is_initialized", "join", "library_path", "local_rank", "local_size", "poll", "rank",
    "reducescatter", "reducescatter_async", "shutdown", "size", "start_timeline",
    "stop_timeline", "synchronize", "transport_built", "version",
    "CollectiveRefusedError", "DuplicateNameError", "HorovodInternalError",
    "HostsUpdatedInterrupt", "KoloError", "KoloTimeoutError", "KoloTypeError", "KoloValueError",
    "LibraryNotFoundError", "MismatchError", "NotInitializedError",
    "RankFailedError", "ShutdownError", "StalledError", "TransportError", "UnsupportedError",
]
