"""Which kolo world and process set each c10d group of backend "kolo" runs on.

The world: the default group's creation starts kolo (``start_world``) unless it
runs already, and checks that kolo's rank and size are those torch passed.

Note [Where the store-based world plugs in]
Today kolo's world is the MPI job (kolo_init under mpiexec or kolorun); torch's
store, rank and size are only checked against it. Once the socket world lands
(kolo_init_store, issue 29), ``start_world`` is the one place to change: without
an MPI job around, it hands kolo the store torch passed (through a small adapter
from c10d's Store: set/get/wait/add/compare_set) with this rank and size, instead
of calling kolo.init().

Note [Process sets come from every rank]
kolo_process_set_add is collective over every rank, but c10d calls a backend's
creator only on the members of a new group. So this module wraps c10d's
``_new_process_group_helper``, which every rank runs for every new group (new_group
requires all ranks to call it, in the same order): for groups of backend "kolo"
the wrapper registers the kolo process set on every rank first, numbers the group
(the same serial on every rank: it prefixes the group's sequence names), and
leaves both for the creator, which runs next on the members. A group whose ranks
are the whole world runs on the global set; groups with the same ranks share one
kolo set (their serials keep their names apart). Sets stay registered until
kolo shuts down (c10d tells a plugin nothing when a group is destroyed).
"""

import functools
import itertools
import threading

import torch.distributed.distributed_c10d as c10d

from ... import _core
from ..._process_sets import add_process_set, global_process_set

_serials = itertools.count()
_sets = {}  # tuple of global ranks -> kolo ProcessSet
_next = threading.local()


# Note [Send and recv over pair sets]
# kolo's C API has collectives only. A send from a to b is a broadcast rooted at a
# in the process set {a, b}, which b's matching recv joins; so each group of at
# most _MAX_P2P_RANKS ranks gets a kolo set for every pair of its ranks when it is
# made (every rank registers them; the whole world's pair is the global set). A
# send completes once the receiver has joined (a rendezvous, as a large gloo send
# does). Receiving from any source has no such form.
_MAX_P2P_RANKS = 8


class GroupInfo:
    """What a kolo process group runs on: its serial (the same on every rank), its
    kolo process set and set id, its members' global ranks (ascending), and the
    sets of its pairs of ranks ({(a, b): ProcessSet}, a < b; empty for a group of
    more than _MAX_P2P_RANKS ranks)."""

    def __init__(self, serial, process_set, global_ranks):
        self.serial = serial
        self.process_set = process_set
        self.set_id = process_set.process_set_id
        self.global_ranks = global_ranks
        self.pairs = {}


def start_world(store, rank, size):
    """Starts kolo for the default group (see Note [Where the store-based world plugs
    in]: `store`, torch's c10d Store, is unused until then); raises RuntimeError
    when kolo's world is not the one torch describes."""
    if not _core.is_initialized():
        try:
            _core.init()
        except Exception as e:  # noqa: BLE001 - kolo's message, as a RuntimeError
            raise RuntimeError("kolo backend: kolo.init() failed: %s" % e) from e
    if (_core.rank(), _core.size()) != (rank, size):
        raise RuntimeError(
            "kolo backend: torch.distributed gave rank %d of %d, but kolo's world (the MPI "
            "job) has rank %d of %d. Start every rank under mpiexec or kolorun with "
            "RANK/WORLD_SIZE matching the MPI rank and size; the store-based world that "
            "takes torch's store (kolo_init_store) is not available yet"
            % (rank, size, _core.rank(), _core.size()))


def _kolo_set(ranks):
    """The kolo set of these global ranks (ascending), registered on first use."""
    if list(ranks) == list(range(_core.size())):
        return global_process_set
    process_set = _sets.get(tuple(ranks))
    if process_set is None:
        process_set = add_process_set(list(ranks))
        _sets[tuple(ranks)] = process_set
    return process_set


def add_pairs(info):
    """Registers the sets of info's pairs of ranks (Note [Send and recv over pair
    sets]); collective over every rank."""
    ranks = info.global_ranks
    if len(ranks) <= _MAX_P2P_RANKS:
        info.pairs = {(a, b): _kolo_set((a, b)) for a, b in itertools.combinations(ranks, 2)}


def _register(global_ranks):
    """GroupInfo for a new group of these global ranks ([]: the default group,
    whose pairs create() registers once kolo runs)."""
    if not global_ranks:
        return GroupInfo(next(_serials), global_process_set, None)
    ranks = sorted(int(r) for r in global_ranks)
    info = GroupInfo(next(_serials), _kolo_set(ranks), ranks)
    add_pairs(info)
    return info


def take_next():
    """The GroupInfo the wrapper left for the creator running now."""
    info = getattr(_next, "info", None)
    if info is None:
        raise RuntimeError("kolo backend: a process group was created outside of "
                           "torch.distributed's init_process_group/new_group")
    _next.info = None
    return info


def _wrap(helper):
    @functools.wraps(helper)
    def wrapper(*args, **kwargs):
        ranks = args[2] if len(args) > 2 else kwargs.get("global_ranks_in_group")
        backend = args[3] if len(args) > 3 else kwargs.get("backend")
        if str(backend).lower() != "kolo":
            return helper(*args, **kwargs)
        if ranks and not _core.is_initialized():
            raise RuntimeError("kolo backend: new_group before init_process_group")
        _next.info = _register(list(ranks or []))
        try:
            return helper(*args, **kwargs)
        finally:
            _next.info = None  # a rank outside the group never runs the creator
    wrapper._kolo_wrapper = True
    return wrapper


def install():
    """Wraps c10d's group helper once (Note [Process sets come from every rank])."""
    if not getattr(c10d._new_process_group_helper, "_kolo_wrapper", False):
        c10d._new_process_group_helper = _wrap(c10d._new_process_group_helper)
