"""Where this process stands: whether kolo runs, its rank and size, and what the
library was built with. Queries only, no collectives; below ``_process_sets`` and
``_core`` (which re-exports these names)."""

import ctypes

from . import _lib
from .exceptions import NotInitializedError


def is_initialized():
    return bool(_lib.load().kolo_is_initialized())


def require_initialized(what):
    """Raises NotInitializedError (a ValueError, as in Horovod) unless kolo runs."""
    if not _lib.load().kolo_is_initialized():
        raise NotInitializedError(
            "%s: kolo has not been initialized; call init() first" % what)


def _topology(fn, what):
    value = fn()
    if value < 0:
        raise NotInitializedError(
            "kolo.%s(): kolo has not been initialized; call kolo.init() first" % what)
    return value


def rank():
    return _topology(_lib.load().kolo_rank, "rank")


def size():
    return _topology(_lib.load().kolo_size, "size")


def local_rank():
    return _topology(_lib.load().kolo_local_rank, "local_rank")


def local_size():
    return _topology(_lib.load().kolo_local_size, "local_size")


def cross_rank():
    return _topology(_lib.load().kolo_cross_rank, "cross_rank")


def cross_size():
    return _topology(_lib.load().kolo_cross_size, "cross_size")


def transport_built(name):
    """(built, reason) for a transport name ("mpi", "ring", "nccl", ...)."""
    reason = ctypes.c_char_p()
    built = _lib.load().kolo_transport_built(name.encode(), ctypes.byref(reason))
    return bool(built), (reason.value or b"").decode()


def version():
    return _lib.load().kolo_version().decode()
