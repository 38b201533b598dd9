"""Lifecycle, handles and submission: the framework-independent half of kolo.

Both front ends (NumPy in ``kolo``, PyTorch in ``kolo.torch``) reduce every call to
raw pointers, counts and kolo dtypes and hand them to :func:`submit`; this module
turns handles into :class:`Handle` objects. Statuses become exceptions in
``_status``; rank, size and the other queries live in ``_topology``; both are
re-exported here. The package's layers, each importing only those below it:
exceptions, _lib, _status, _topology, _process_sets, _core, _numpy_ops.

Note [Buffers live until the handle completes]
A collective reads and writes the caller's memory from kolo's coordinator thread,
so every object whose memory a handle touches is referenced by the handle's state
until the operation has completed - even if the caller drops the Handle early. A
dropped, incomplete handle is parked in ``_orphans`` and released by a later call
once it has completed (or by shutdown, which completes every handle).
"""

import atexit
import ctypes
import itertools
import os
import threading

from . import _lib
from ._process_sets import add_process_set, set_id
from ._status import _EXCEPTIONS, check, error, status_name  # noqa: F401 (re-exported)
from ._topology import (cross_rank, cross_size, is_initialized, local_rank,  # noqa: F401
                        local_size, rank, require_initialized, size, transport_built, version)
from .exceptions import KoloError, KoloTimeoutError, KoloTypeError, KoloValueError
from .exceptions import UnsupportedError

# Reduction operators, as kolo numbers them (the names are Horovod's).
Sum = _lib.OP_SUM
Average = _lib.OP_AVERAGE
Min = _lib.OP_MIN
Max = _lib.OP_MAX
Product = _lib.OP_PRODUCT
Adasum = _lib.OP_ADASUM  # allreduce only; see KOLO_OP_ADASUM in kolo.h

_OP_NAMES = {Sum: "Sum", Average: "Average", Min: "Min", Max: "Max", Product: "Product",
             Adasum: "Adasum"}

# How long one kolo_wait call blocks before Python gets a chance to handle signals
# (Ctrl-C). kolo_wait itself polls briefly, then sleeps.
_WAIT_SLICE_SECONDS = 0.2


def lib():
    return _lib.load()


# ---- lifecycle -----------------------------------------------------------------------

_atexit_registered = False


def init(comm=None, process_sets=None):
    """Starts kolo on MPI_COMM_WORLD, or on ``comm`` (an mpi4py communicator or a
    Fortran communicator handle, as ``MPI_Comm_c2f`` gives), then registers
    ``process_sets`` (ProcessSet objects or lists of ranks; "dynamic" is accepted
    and changes nothing: sets may always be added later). Collective: if it fails
    on any rank (a bad knob, knobs that must agree set differently), it raises on
    every rank with the same message, naming the ranks. Calling it again while kolo
    runs in this process does nothing, as in Horovod. After another rank's shutdown
    (or a failure) stopped kolo here it raises ShutdownError: call shutdown() on
    this rank first, then init() again on every rank."""
    global _atexit_registered
    if comm is None:
        status = lib().kolo_init()
    elif isinstance(comm, (list, tuple)):
        raise KoloValueError("kolo.init(comm=[ranks]) is not supported; pass an MPI communicator")
    else:
        handle = comm.py2f() if hasattr(comm, "py2f") else comm
        if not isinstance(handle, int):
            raise KoloValueError("comm must be an mpi4py communicator or an int Fortran handle")
        status = lib().kolo_init_comm(handle)
    if status == _lib.ERR_ALREADY_INITIALIZED:  # runs in this process (never a stopped kolo)
        return
    check(status, "kolo.init")
    if not _atexit_registered:
        atexit.register(shutdown)
        _atexit_registered = True
    if process_sets is not None and process_sets != "dynamic":
        for process_set in process_sets:
            add_process_set(process_set)


def shutdown():
    """Stops kolo; pending operations complete with ShutdownError on every rank."""
    check(lib().kolo_shutdown(), "kolo.shutdown")
    _reap_orphans()


# ---- names -------------------------------------------------------------------------

_name_counter = itertools.count()


def op_name(kind, name):
    """The tensor name to submit. Unnamed tensors get Horovod's "<kind>.noname.<n>",
    with a per-process counter: ranks that make the same calls in the same order
    generate the same names."""
    if name is None:
        return "%s.noname.%d" % (kind, next(_name_counter))
    if not isinstance(name, str):
        raise KoloTypeError("name must be a str, got %s" % type(name).__name__)
    return name


def check_op(op, allowed=None):
    if op not in _OP_NAMES:
        raise KoloValueError("unknown reduce op %r (use Sum, Average, Min, Max, Product or "
                             "Adasum)" % op)
    if allowed is not None and op not in allowed:
        raise KoloValueError("op=%s is not supported here (use %s)" % (
            _OP_NAMES[op], " or ".join(_OP_NAMES[a] for a in allowed)))
    return op


def check_reducescatter_op(op, what):
    """A reducescatter's op: Sum or Average. Another of kolo's ops (Adasum, Min, ...)
    raises UnsupportedError, a RuntimeError, as Horovod's reducescatter raises
    HorovodInternalError for them; an unknown value is a ValueError."""
    check_op(op)
    if op not in (Sum, Average):
        raise UnsupportedError("%s: op=%s is not supported by reducescatter (use Sum or "
                               "Average)" % (what, _OP_NAMES[op]), "KOLO_ERR_UNSUPPORTED")
    return op


# ---- handles -----------------------------------------------------------------------

_registry_lock = threading.Lock()
_orphans = set()


class _State:
    """One operation in flight: the C handle and everything it must keep alive."""

    __slots__ = ("ptr", "keep", "finish", "what", "done", "result", "exc", "__weakref__")

    def __init__(self, ptr, keep, finish, what):
        self.ptr = ptr
        self.keep = keep
        self.finish = finish
        self.what = what
        self.done = False
        self.result = None
        self.exc = None

    def complete(self, status):
        """Reads the outcome of a completed handle, then releases it."""
        try:
            if status != _lib.OK:
                message = lib().kolo_handle_message(self.ptr).decode(errors="replace")
                self.exc = error(status, message, self.what, completed=True)
            elif self.finish is not None:
                self.result = self.finish(self.ptr)
        except BaseException as e:  # a failing finish still releases the handle
            self.exc = e
        finally:
            lib().kolo_handle_release(self.ptr)
            self.ptr = None
            self.keep = None
            self.finish = None
            self.done = True


class Handle:
    """An asynchronous collective. ``poll()`` never blocks; ``wait()`` blocks until it
    completes and returns its result (or raises its error); both may be called from
    any thread. The result stays available after completion. See
    Note [Buffers live until the handle completes]."""

    __slots__ = ("_state", "_lock", "__weakref__")

    def __init__(self, state):
        self._state = state
        self._lock = threading.Lock()

    def poll(self):
        st = self._state
        if st.done:
            return True
        done = ctypes.c_int(0)
        with self._lock:
            if st.done:
                return True
            check(lib().kolo_poll(st.ptr, ctypes.byref(done)), "kolo_poll")
            if done.value:
                st.complete(lib().kolo_handle_status(st.ptr))
        return bool(done.value)

    def wait(self, timeout=None):
        st = self._state
        with self._lock:
            if not st.done:
                self._wait_locked(st, timeout)
        if st.exc is not None:
            raise st.exc
        return st.result

    def _wait_locked(self, st, timeout):
        remaining = None if timeout is None else float(timeout)
        while True:
            slice_s = _WAIT_SLICE_SECONDS if remaining is None else min(remaining, _WAIT_SLICE_SECONDS)
            status = lib().kolo_wait(st.ptr, slice_s)
            if status != _lib.ERR_TIMEOUT:
                st.complete(status)
                return
            if remaining is not None:
                remaining -= slice_s
                if remaining <= 0:
                    raise KoloTimeoutError("%s: not complete after %g s" % (st.what, timeout),
                                           "KOLO_ERR_TIMEOUT")

    def done(self):
        return self._state.done

    def __del__(self):
        st = getattr(self, "_state", None)
        if st is not None and not st.done:
            with _registry_lock:
                _orphans.add(st)


def _reap_orphans():
    if not _orphans:
        return
    with _registry_lock:
        states = list(_orphans)
    for st in states:
        done = ctypes.c_int(0)
        if st.ptr is None or lib().kolo_poll(st.ptr, ctypes.byref(done)) != _lib.OK or done.value:
            if st.ptr is not None:
                st.complete(lib().kolo_handle_status(st.ptr))
            with _registry_lock:
                _orphans.discard(st)


def submit(fn_name, args, keep, finish, what, shapes=None, process_set=0):
    """Calls an async kolo function whose last argument is the handle out-pointer.

    keep: objects whose memory the operation uses (held until completion).
    finish: called with the completed C handle; its return value is the result.
    shapes: the tensors' shapes (a list of tuples, one per tensor), which ranks then
    agree on in full (kolo.h, kolo_options_t): the call's *_ex form takes them.
    process_set: a process set's id; other than 0, the _ex form runs in that set.
    """
    _reap_orphans()
    if shapes is not None or process_set:
        opts = _lib.options(shapes, process_set)
        fn_name, args, keep = fn_name + "_ex", tuple(args) + (ctypes.byref(opts),), (keep, opts)
    fn = lib().fn(fn_name)
    ptr = ctypes.c_void_p()
    status = fn(*args, ctypes.byref(ptr))
    check(status, what)
    return Handle(_State(ptr.value, keep, finish, what))


def handle_output(ptr):
    """(address, bytes) of a completed allgather/alltoall's handle-owned output."""
    data = ctypes.c_void_p()
    nbytes = ctypes.c_int64()
    check(lib().kolo_handle_output(ptr, ctypes.byref(data), ctypes.byref(nbytes)),
          "kolo_handle_output")
    return data.value, nbytes.value


def handle_splits(ptr, n):
    splits = (ctypes.c_int64 * n)()
    check(lib().kolo_handle_splits(ptr, splits, n), "kolo_handle_splits")
    return list(splits)


def barrier(process_set=None):
    """Blocks until every rank (of ``process_set``) has entered the barrier."""
    require_initialized("barrier")
    ps = set_id(process_set, "barrier")
    if ps:
        check(lib().fn("kolo_barrier_ex")(ctypes.byref(_lib.Options(ps, 0, None))), "kolo.barrier",
              completed=True)
    else:
        check(lib().fn("kolo_barrier")(), "kolo.barrier", completed=True)


def join(process_set=None):
    """This rank has run out of data: blocks until every rank (of ``process_set``)
    has joined; meanwhile allreduces of other ranks complete as if this rank
    contributed zeros. Returns the last rank to join (a global rank)."""
    require_initialized("join")
    ps = set_id(process_set, "join")
    last = ctypes.c_int(-1)
    if ps:
        check(lib().fn("kolo_join_ex")(ctypes.byref(_lib.Options(ps, 0, None)),
                                       ctypes.byref(last)), "kolo.join", completed=True)
    else:
        check(lib().fn("kolo_join")(ctypes.byref(last)), "kolo.join", completed=True)
    return last.value


def start_timeline(file_path, mark_cycles=False):
    """Starts this rank's Chrome-trace timeline (kolo_timeline_start). Per rank: a
    path with ``%r`` in it (replaced by the rank) or a directory gives every rank
    its own file; any other path is written by rank 0 alone, as Horovod's.
    ``mark_cycles`` adds an event per negotiation cycle. Raises KoloValueError
    when already started or when the file cannot be opened."""
    require_initialized("start_timeline")
    path = os.fsencode(file_path)
    check(lib().fn("kolo_timeline_start")(path, 1 if mark_cycles else 0), "kolo.start_timeline")


def stop_timeline():
    """Ends this rank's timeline: the file is complete, valid JSON when this
    returns (kolo_timeline_stop). Raises KoloValueError when not started."""
    require_initialized("stop_timeline")
    check(lib().fn("kolo_timeline_stop")(), "kolo.stop_timeline")


def reducescatter_shard_rows(rows, rank_, size_):
    """Rows of rank_'s shard when `rows` are scattered over size_ ranks (Horovod's
    split: the first rows % size_ ranks get one more)."""
    try:
        return lib().fn("kolo_reducescatter_shard_rows")(rows, rank_, size_)
    except UnsupportedError:
        q, m = divmod(rows, size_)
        return q + 1 if rank_ < m else q


def submit_grouped(base, inputs, outputs, counts, dtype, op, prescale, postscale, device, keep,
                   finish, shapes=None, process_set=0):
    """kolo_grouped_allreduce_async over raw addresses; tensor i is named "<base>.<i>"."""
    n = len(inputs)
    names = [("%s.%d" % (base, i)).encode() for i in range(n)]
    c_names = (ctypes.c_char_p * n)(*names)
    c_in = (ctypes.c_void_p * n)(*inputs)
    c_out = (ctypes.c_void_p * n)(*outputs)
    c_counts = (ctypes.c_int64 * n)(*counts)
    args = (n, c_names, c_in, c_out, c_counts, dtype, check_op(op), float(prescale),
            float(postscale), device)
    return submit("kolo_grouped_allreduce_async", args,
                  (keep, names, c_names, c_in, c_out, c_counts), finish,
                  "grouped_allreduce %r" % base, shapes, process_set)


def submit_grouped_rows(kind, base, inputs, outputs, shapes, dtype, device, keep, finish,
                        op=None, prescale=1.0, postscale=1.0, process_set=0):
    """kolo_grouped_allgather_async (kind "allgather"; outputs None) or
    kolo_grouped_reducescatter_async (kind "reducescatter") over raw addresses and the
    members' shapes (each at least one dimension), in the process set of that id;
    tensor i is named "<base>.<i>"."""
    n = len(inputs)
    names = [("%s.%d" % (base, i)).encode() for i in range(n)]
    rows = [s[0] if len(s) else 1 for s in shapes]  # kolo refuses a 0-dimensional shape
    row_counts = [int(_prod(s[1:])) for s in shapes]
    c_names = (ctypes.c_char_p * n)(*names)
    c_in = (ctypes.c_void_p * n)(*inputs)
    c_rows = (ctypes.c_int64 * n)(*rows)
    c_row_counts = (ctypes.c_int64 * n)(*row_counts)
    opts = _lib.options(shapes, process_set)
    keep = (keep, names, c_names, c_in, c_rows, c_row_counts, opts)
    if kind == "allgather":
        args = (n, c_names, c_in, c_rows, c_row_counts, dtype, device, ctypes.byref(opts))
    else:
        c_out = (ctypes.c_void_p * n)(*outputs)
        keep = keep + (c_out,)
        args = (n, c_names, c_in, c_out, c_rows, c_row_counts, dtype,
                check_reducescatter_op(op, "grouped_reducescatter %r" % base), float(prescale),
                float(postscale), device, ctypes.byref(opts))
    return submit("kolo_grouped_%s_async" % kind, args, keep, finish,
                  "grouped_%s %r" % (kind, base))


def _prod(values):
    out = 1
    for v in values:
        out *= int(v)
    return out


def rows_shape(shape):
    """The shape that allgather and alltoall give kolo: a 0-dimensional tensor goes as
    one row of one element, as its rows and row count do."""
    return tuple(shape) if len(shape) else (1,)


def int64_splits(splits, nranks, rows, what):
    """An alltoall's send splits as a C int64 array (None: an even split)."""
    if splits is None:
        if rows % nranks:
            raise KoloValueError("%s: %d rows do not split evenly over %d ranks; pass splits" % (
                what, rows, nranks))
        return None
    values = [int(s) for s in splits]
    if len(values) != nranks:
        raise KoloValueError("%s: splits has %d entries for %d ranks" % (what, len(values), nranks))
    if any(v < 0 for v in values) or sum(values) != rows:
        raise KoloValueError("%s: splits %s must be non-negative and sum to the %d rows" % (
            what, values, rows))
    return (ctypes.c_int64 * nranks)(*values)
