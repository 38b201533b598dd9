"""The collectives on NumPy arrays.

Zero-copy: a C-contiguous array's own memory (``arr.ctypes.data``) goes to kolo, and
results are written straight into the output array. A non-contiguous array, an
unsupported dtype or a read-only output is a ``ValueError`` - never a silent copy.
Each ``*_async`` returns a :class:`kolo.Handle`; ``synchronize(handle)`` (or
``handle.wait()``) returns the result. The arrays stay referenced by the handle
until it completes.
"""

import ctypes

import numpy as np

from . import _core, _lib
from ._core import Average
from ._process_sets import set_id, set_rank, set_size
from .exceptions import KoloValueError

_DTYPES = {
    np.dtype(np.uint8): _lib.UINT8,
    np.dtype(np.int8): _lib.INT8,
    np.dtype(np.uint16): _lib.UINT16,
    np.dtype(np.int16): _lib.INT16,
    np.dtype(np.int32): _lib.INT32,
    np.dtype(np.int64): _lib.INT64,
    np.dtype(np.float16): _lib.FLOAT16,
    np.dtype(np.float32): _lib.FLOAT32,
    np.dtype(np.float64): _lib.FLOAT64,
    np.dtype(np.bool_): _lib.BOOL,
}


def _kolo_dtype(arr, what):
    dtype = _DTYPES.get(arr.dtype.newbyteorder("=")) if arr.dtype.isnative else None
    if dtype is None:
        raise KoloValueError("%s: dtype %s is not supported (supported: %s)" % (
            what, arr.dtype, ", ".join(str(d) for d in _DTYPES)))
    return dtype


def _as_input(x, what):
    arr = np.asarray(x)
    if not arr.flags.c_contiguous:
        raise KoloValueError(
            "%s: the array is not C-contiguous (kolo reads arrays in place); pass "
            "np.ascontiguousarray(x)" % what)
    return arr, _kolo_dtype(arr, what)


def _check_output(out, like, what):
    if not isinstance(out, np.ndarray):
        raise KoloValueError("%s: out must be a numpy.ndarray" % what)
    if out.dtype != like.dtype or out.shape != like.shape:
        raise KoloValueError("%s: out has dtype %s shape %s, expected %s %s" % (
            what, out.dtype, out.shape, like.dtype, like.shape))
    if not out.flags.c_contiguous or not out.flags.writeable:
        raise KoloValueError("%s: out must be C-contiguous and writeable" % what)
    return out


def _rows(arr):
    """(rows, row_count) of an array: its first dimension and the rest's product."""
    if arr.ndim == 0:
        return 1, 1
    rows = arr.shape[0]
    return rows, int(np.prod(arr.shape[1:], dtype=np.int64))


def _result(value):
    return lambda ptr: value


def allreduce_async(array, op=Average, name=None, prescale_factor=1.0, postscale_factor=1.0,
                    out=None, process_set=None):
    """Starts an allreduce; the result (``out``, or a new array) comes from synchronize.
    ``out=array`` reduces in place."""
    what = "allreduce"
    _core.require_initialized(what)
    ps = set_id(process_set, what)
    arr, dtype = _as_input(array, what)
    out = np.empty_like(arr) if out is None else _check_output(out, arr, what)
    name = _core.op_name("allreduce", name)
    args = (name.encode(), arr.ctypes.data, out.ctypes.data, arr.size, dtype,
            _core.check_op(op), float(prescale_factor), float(postscale_factor),
            _lib.CPU_DEVICE)
    return _core.submit("kolo_allreduce_async", args, (arr, out), _result(out),
                        "allreduce %r" % name, [arr.shape], ps)


def allreduce(array, op=Average, name=None, prescale_factor=1.0, postscale_factor=1.0, out=None,
              process_set=None):
    return allreduce_async(array, op, name, prescale_factor, postscale_factor, out,
                           process_set).wait()


def grouped_allreduce_async(arrays, op=Average, name=None, prescale_factor=1.0,
                            postscale_factor=1.0, out=None, process_set=None):
    """Starts one allreduce of a group of arrays (one dtype), negotiated and reduced as
    a unit. Names are "<name>.<i>"; the result is the list of outputs."""
    what = "grouped_allreduce"
    _core.require_initialized(what)
    ps = set_id(process_set, what)
    inputs = [_as_input(a, what) for a in arrays]
    if not inputs:
        raise KoloValueError("grouped_allreduce: the group is empty")
    dtypes = {d for _, d in inputs}
    if len(dtypes) != 1:
        raise KoloValueError("grouped_allreduce: all arrays must share one dtype, got %s" % (
            sorted({str(a.dtype) for a, _ in inputs})))
    arrs = [a for a, _ in inputs]
    if out is None:
        outs = [np.empty_like(a) for a in arrs]
    else:
        if len(out) != len(arrs):
            raise KoloValueError("grouped_allreduce: out has %d arrays for %d inputs" % (
                len(out), len(arrs)))
        outs = [_check_output(o, a, what) for o, a in zip(out, arrs)]
    base = _core.op_name("grouped_allreduce", name)
    return _core.submit_grouped(base, [a.ctypes.data for a in arrs],
                                [o.ctypes.data for o in outs], [a.size for a in arrs],
                                dtypes.pop(), op, prescale_factor, postscale_factor,
                                _lib.CPU_DEVICE, (arrs, outs), _result(outs),
                                [a.shape for a in arrs], ps)


def grouped_allreduce(arrays, op=Average, name=None, prescale_factor=1.0, postscale_factor=1.0,
                      out=None, process_set=None):
    return grouped_allreduce_async(arrays, op, name, prescale_factor, postscale_factor,
                                   out, process_set).wait()


def _gathered(dtype, row_shape, nranks):
    """finish() for allgather/alltoall: copies the handle-owned output into a new array."""

    def finish(ptr):
        addr, nbytes = _core.handle_output(ptr)
        splits = _core.handle_splits(ptr, nranks)
        out = np.empty((sum(splits),) + row_shape, dtype=dtype)
        if out.nbytes != nbytes:
            raise _core.KoloError("kolo returned %d bytes for %d rows of %s %s" % (
                nbytes, sum(splits), row_shape, dtype))
        if nbytes:
            ctypes.memmove(out.ctypes.data, addr, nbytes)
        return out, np.asarray(splits, dtype=np.int64)

    return finish


def allgather_async(array, name=None, process_set=None):
    """Starts an allgather: every rank's rows (first dimension) concatenated in rank
    order. Ranks may contribute different numbers of rows."""
    what = "allgather"
    _core.require_initialized(what)
    ps = set_id(process_set, what)
    arr, dtype = _as_input(array, what)
    rows, row_count = _rows(arr)
    name = _core.op_name("allgather", name)
    gathered = _gathered(arr.dtype, arr.shape[1:], set_size(ps))
    args = (name.encode(), arr.ctypes.data, rows, row_count, dtype, _lib.CPU_DEVICE)
    return _core.submit("kolo_allgather_async", args, (arr,), lambda p: gathered(p)[0],
                        "allgather %r" % name, [_core.rows_shape(arr.shape)], ps)


def allgather(array, name=None, process_set=None):
    return allgather_async(array, name, process_set).wait()


def _group_inputs(arrays, what):
    inputs = [_as_input(a, what) for a in arrays]
    if not inputs:
        raise KoloValueError("%s: the group is empty" % what)
    if len({d for _, d in inputs}) != 1:
        raise KoloValueError("%s: all arrays must share one dtype, got %s" % (
            what, sorted({str(a.dtype) for a, _ in inputs})))
    return [a for a, _ in inputs], inputs[0][1]


def grouped_allgather_async(arrays, name=None):
    """Starts one allgather of a group of arrays (one dtype), negotiated as a unit. Names
    are "<name>.<i>"; the result is the list of gathered arrays."""
    what = "grouped_allgather"
    _core.require_initialized(what)
    arrs, dtype = _group_inputs(arrays, what)
    shapes = [_core.rows_shape(a.shape) for a in arrs]
    nranks = _core.size()

    def finish(ptr):
        addr, nbytes = _core.handle_output(ptr)
        splits = _core.handle_splits(ptr, nranks * len(arrs))
        outs, offset = [], 0
        for m, shape in enumerate(shapes):
            out = np.empty((sum(splits[m * nranks:(m + 1) * nranks]),) + tuple(shape[1:]),
                           dtype=arrs[m].dtype)
            if out.nbytes:
                ctypes.memmove(out.ctypes.data, addr + offset, out.nbytes)
            offset += out.nbytes
            outs.append(out)
        if offset != nbytes:
            raise _core.KoloError("%s: kolo returned %d bytes, expected %d" % (
                what, nbytes, offset))
        return outs

    base = _core.op_name("grouped_allgather", name)
    return _core.submit_grouped_rows("allgather", base, [a.ctypes.data for a in arrs], None,
                                     shapes, dtype, _lib.CPU_DEVICE, (arrs,), finish)


def grouped_allgather(arrays, name=None):
    return grouped_allgather_async(arrays, name).wait()


def grouped_reducescatter_async(arrays, op=Average, name=None, prescale_factor=1.0,
                                postscale_factor=1.0):
    """Starts one reducescatter of a group of arrays (Sum or Average), negotiated as a
    unit; the result is this rank's shard of each."""
    what = "grouped_reducescatter"
    _core.require_initialized(what)
    arrs, dtype = _group_inputs(arrays, what)
    rank, size = _core.rank(), _core.size()
    outs = [np.empty((_core.reducescatter_shard_rows(a.shape[0], rank, size),) + a.shape[1:],
                     dtype=a.dtype) if a.ndim else np.empty(0, dtype=a.dtype) for a in arrs]
    base = _core.op_name("grouped_reducescatter", name)
    return _core.submit_grouped_rows("reducescatter", base, [a.ctypes.data for a in arrs],
                                     [o.ctypes.data for o in outs], [a.shape for a in arrs],
                                     dtype, _lib.CPU_DEVICE, (arrs, outs), _result(outs), op=op,
                                     prescale=prescale_factor, postscale=postscale_factor)


def grouped_reducescatter(arrays, op=Average, name=None, prescale_factor=1.0,
                          postscale_factor=1.0):
    return grouped_reducescatter_async(arrays, op, name, prescale_factor,
                                       postscale_factor).wait()


def broadcast_async(array, root_rank, name=None, out=None, process_set=None):
    """Starts a broadcast of root_rank's array; ``out=array`` broadcasts in place."""
    what = "broadcast"
    _core.require_initialized(what)
    ps = set_id(process_set, what)
    arr, dtype = _as_input(array, what)
    out = np.empty_like(arr) if out is None else _check_output(out, arr, what)
    name = _core.op_name("broadcast", name)
    args = (name.encode(), arr.ctypes.data, out.ctypes.data, arr.size, dtype, int(root_rank),
            _lib.CPU_DEVICE)
    return _core.submit("kolo_broadcast_async", args, (arr, out), _result(out),
                        "broadcast %r" % name, [arr.shape], ps)


def broadcast(array, root_rank, name=None, out=None, process_set=None):
    """root_rank (a global rank, also with a process_set) broadcasts its array."""
    return broadcast_async(array, root_rank, name, out, process_set).wait()


def alltoall_async(array, splits=None, name=None, process_set=None):
    """Starts an alltoall: splits[d] rows go to rank d (an even split when None). The
    result is the received rows in source-rank order, plus, when splits were given,
    the rows received from each rank."""
    what = "alltoall"
    _core.require_initialized(what)
    ps = set_id(process_set, what)
    arr, dtype = _as_input(array, what)
    rows, row_count = _rows(arr)
    nranks = set_size(ps)
    send = _core.int64_splits(splits, nranks, rows, what)
    name = _core.op_name("alltoall", name)
    gathered = _gathered(arr.dtype, arr.shape[1:], nranks)
    finish = (lambda p: gathered(p)[0]) if splits is None else gathered
    args = (name.encode(), arr.ctypes.data, rows, row_count, send, dtype, _lib.CPU_DEVICE)
    return _core.submit("kolo_alltoall_async", args, (arr, send), finish, "alltoall %r" % name,
                        [_core.rows_shape(arr.shape)], ps)


def alltoall(array, splits=None, name=None, process_set=None):
    return alltoall_async(array, splits, name, process_set).wait()


def reducescatter_async(array, op=Average, name=None, prescale_factor=1.0, postscale_factor=1.0,
                        process_set=None):
    """Starts a reducescatter: the rows are reduced (Sum or Average) and this rank gets
    its shard (Horovod's split: the first rows % size ranks get one extra row)."""
    what = "reducescatter"
    _core.require_initialized(what)
    ps = set_id(process_set, what)
    arr, dtype = _as_input(array, what)
    rows, row_count = _rows(arr)
    shard = _core.reducescatter_shard_rows(rows, max(set_rank(ps), 0), set_size(ps))
    out = np.empty((shard,) + arr.shape[1:], dtype=arr.dtype)
    name = _core.op_name("reducescatter", name)
    args = (name.encode(), arr.ctypes.data, out.ctypes.data, rows, row_count, dtype,
            _core.check_reducescatter_op(op, what), float(prescale_factor), float(postscale_factor),
            _lib.CPU_DEVICE)
    return _core.submit("kolo_reducescatter_async", args, (arr, out), _result(out),
                        "reducescatter %r" % name, [arr.shape], ps)


def reducescatter(array, op=Average, name=None, prescale_factor=1.0, postscale_factor=1.0,
                  process_set=None):
    return reducescatter_async(array, op, name, prescale_factor, postscale_factor,
                               process_set).wait()


def poll(handle):
    """True when the handle has completed. Never blocks."""
    return handle.poll()


def synchronize(handle):
    """Waits for the handle and returns its result (raises its error)."""
    return handle.wait()
