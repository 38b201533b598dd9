"""Process sets, with Horovod's names and semantics (``hvd.ProcessSet``,
``hvd.add_process_set``, ``hvd.remove_process_set``, ``hvd.global_process_set``).

A process set is a subset of the ranks that runs collectives on its own: its own
negotiation and communicators in libkolo (kolo.h, "process sets"), so a set that
waits for a slow member never holds up another. Every op takes ``process_set=``;
in a set, ranks and sizes are the set's (rank i is the i-th smallest member), and
a broadcast's root is still a global rank. An op on a rank outside the set raises
a ValueError there, before anything starts.

``add_process_set`` and ``remove_process_set`` are collective over every rank, in
the same order on every rank, as in Horovod; other sets' work goes on meanwhile.
"""

import ctypes

from . import _lib
from ._status import check
from ._topology import rank, size
from .exceptions import KoloValueError, NotInitializedError


def _lib_fn(name):
    return _lib.load().fn(name)


class ProcessSet:
    """A set of ranks: ``ProcessSet([0, 2])``, registered by ``add_process_set`` (or
    ``init(process_sets=[...])``); ``process_set_id`` is None until then. The global
    set is ``global_process_set`` (id 0)."""

    def __init__(self, ranks=None):
        self.process_set_id = None
        if ranks is None:
            self.ranks = None
        else:
            try:
                self.ranks = sorted(int(r) for r in ranks)
            except TypeError:
                raise KoloValueError(
                    "ProcessSet takes a list of ranks (an MPI communicator is not supported)")

    def _id(self, what):
        if self.process_set_id is None:
            raise KoloValueError("%s: %r is not registered; call add_process_set() first (on "
                                 "every rank)" % (what, self))
        return self.process_set_id

    def _query(self, fn, what):
        """A kolo_process_set_* query; -1 from it is an error (unknown id, not running)."""
        value = _lib_fn(fn)(self._id(what))
        if value < 0:
            message = _lib.load().kolo_last_error().decode()
            cls = NotInitializedError if "not initialised" in message else KoloValueError
            raise cls("%s: %s" % (what, message))
        return value

    def rank(self):
        """This rank's rank in the set; -1 when it is not a member."""
        if not self.included():
            return -1
        return self._query("kolo_process_set_rank", "ProcessSet.rank")

    def size(self):
        return self._query("kolo_process_set_size", "ProcessSet.size")

    def included(self):
        """Whether this rank is a member."""
        return self._query("kolo_process_set_included", "ProcessSet.included") == 1

    def __eq__(self, other):
        if not isinstance(other, ProcessSet):
            return NotImplemented
        return self.process_set_id == other.process_set_id and self.ranks == other.ranks

    def __hash__(self):
        return hash((self.process_set_id, tuple(self.ranks or ())))

    def __repr__(self):
        if self.process_set_id == 0:
            return "ProcessSet(process_set_id=0, global)"
        return "ProcessSet(process_set_id=%s, ranks=%s)" % (self.process_set_id, self.ranks)


class _GlobalProcessSet(ProcessSet):
    def __init__(self):
        super().__init__()
        self.process_set_id = 0

    @property
    def ranks(self):
        size = _lib_fn("kolo_size")()
        return list(range(size)) if size > 0 else None

    @ranks.setter
    def ranks(self, value):
        pass


global_process_set = _GlobalProcessSet()


def set_id(process_set, what):
    """The id of ``process_set`` (None: the global set) for an op named ``what``."""
    if process_set is None:
        return 0
    if not isinstance(process_set, ProcessSet):
        raise KoloValueError("%s: process_set must be a kolo ProcessSet, got %s" % (
            what, type(process_set).__name__))
    return process_set._id(what)


def set_size(process_set_id):
    if process_set_id == 0:
        return size()
    return _lib_fn("kolo_process_set_size")(process_set_id)


def set_rank(process_set_id):
    if process_set_id == 0:
        return rank()
    return _lib_fn("kolo_process_set_rank")(process_set_id)


def add_process_set(process_set):
    """Registers ``process_set`` (a ProcessSet or a list of ranks) and returns it.
    Collective over every rank, each passing the same members. Raises ValueError on
    every rank when ranks differ, a rank repeats or is out of range, or a set of
    those ranks exists already."""
    if not isinstance(process_set, ProcessSet):
        process_set = ProcessSet(process_set)
    if process_set.process_set_id is not None:
        raise KoloValueError("add_process_set: %r is registered already" % (process_set,))
    ranks = process_set.ranks or []
    c_ranks = (ctypes.c_int * max(len(ranks), 1))(*ranks)
    new_id = ctypes.c_int32(-1)
    check(_lib_fn("kolo_process_set_add")(c_ranks, len(ranks), ctypes.byref(new_id)),
           "add_process_set")
    process_set.process_set_id = new_id.value
    return process_set


def remove_process_set(process_set):
    """Removes a registered set (collective over every rank); returns True. Raises
    ValueError on every rank for the global set, an unregistered set, or a set with
    operations in flight on any rank."""
    if not isinstance(process_set, ProcessSet):
        raise KoloValueError("remove_process_set: expected a ProcessSet, got %s" % (
            type(process_set).__name__))
    set_id_ = process_set._id("remove_process_set")
    check(_lib_fn("kolo_process_set_remove")(set_id_), "remove_process_set")
    process_set.process_set_id = None
    return True
