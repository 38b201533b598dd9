"""One kolo operation per function, on contiguous CPU (or CUDA) tensors, under a
name given in full: the layer between the c10d process group and kolo's C API.

Each returns a kolo Handle (kolo._core.Handle) whose wait() gives the result
noted; ``ps`` is a kolo process set id (0: the global set) and every tensor's
shape is negotiated (kolo.h, Note [Negotiated shapes]), so ranks that disagree on
a shape, a dtype or the collective itself fail on every rank with kolo's message
naming each rank's value. Names are used as given: the process group passes the
same name for every kolo call at one position of its sequence, whatever the call.
"""

from ... import _core
from ...exceptions import KoloValueError
from .._tensors import _check_tensor, _rows, _split_group_output, _use_output


def allreduce(src, out, name, op, ps):
    """out = the reduction of every rank's src (out may be src). Result: out."""
    what = "allreduce %r" % name
    dtype, device = _check_tensor(src, what)
    args = (name.encode(), src.data_ptr(), out.data_ptr(), src.numel(), dtype, op, 1.0, 1.0,
            device)
    return _core.submit("kolo_allreduce_async", args, (src, out), lambda ptr: out, what,
                        [tuple(src.shape)], ps)


def grouped_allreduce(srcs, outs, name, op, ps):
    """outs[i] = the reduction of srcs[i], negotiated as one unit ("<name>.<i>")."""
    what = "grouped allreduce %r" % name
    checked = [_check_tensor(s, what) for s in srcs]
    if len({d for d, _ in checked}) != 1:
        raise KoloValueError("%s: the tensors have different dtypes: %s" % (
            what, sorted({str(s.dtype) for s in srcs})))
    return _core.submit_grouped(name, [s.data_ptr() for s in srcs], [o.data_ptr() for o in outs],
                                [s.numel() for s in srcs], checked[0][0], op, 1.0, 1.0,
                                checked[0][1], (srcs, outs), lambda ptr: outs,
                                [tuple(s.shape) for s in srcs], ps)


def allgather(src, name, ps, nranks, use=None):
    """Every rank's rows of src (first dimension), concatenated in set-rank order.
    Result: (gathered tensor, int32 tensor of each rank's rows); with `use`,
    use(those two)'s result, the gathered tensor then viewing kolo's output
    (_tensors._use_output)."""
    what = "allgather %r" % name
    dtype, device = _check_tensor(src, what)
    rows, row_count = _rows(src)
    args = (name.encode(), src.data_ptr(), rows, row_count, dtype, device)
    return _core.submit("kolo_allgather_async", args, (src,), _use_output(src, nranks, what, use),
                        what, [_core.rows_shape(src.shape)], ps)


def allgather_into(src, out, name, ps):
    """Every rank's src (one row each, the same shape on every rank) into out, in
    set-rank order, with no copy out of kolo (kolo_allgather_into_async). Result: out."""
    what = "allgather %r" % name
    dtype, device = _check_tensor(src, what)
    rows, row_count = _rows(src)
    args = (name.encode(), src.data_ptr(), out.data_ptr(), rows, row_count, dtype, device)
    return _core.submit("kolo_allgather_into_async", args, (src, out), lambda ptr: out, what,
                        [_core.rows_shape(src.shape)], ps)


def grouped_allgather(srcs, name, ps, nranks):
    """One allgather per member, negotiated as one unit. Result: a list of tensors."""
    what = "grouped allgather %r" % name
    checked = [_check_tensor(s, what) for s in srcs]
    shapes = [_core.rows_shape(s.shape) for s in srcs]
    finish = _split_group_output(srcs[0], shapes, nranks, what)
    return _core.submit_grouped_rows("allgather", name, [s.data_ptr() for s in srcs], None, shapes,
                                     checked[0][0], checked[0][1], (srcs,), finish,
                                     process_set=ps)


def alltoall(src, splits, name, ps, nranks, use=None):
    """Rows of src, splits[d] of them to set rank d (None: an even split). Result:
    (received rows in source order, int32 tensor of rows from each rank); with
    `use`, as allgather's."""
    what = "alltoall %r" % name
    dtype, device = _check_tensor(src, what)
    rows, row_count = _rows(src)
    send = _core.int64_splits(splits, nranks, rows, what)
    args = (name.encode(), src.data_ptr(), rows, row_count, send, dtype, device)
    return _core.submit("kolo_alltoall_async", args, (src, send),
                        _use_output(src, nranks, what, use), what,
                        [_core.rows_shape(src.shape)], ps)


def broadcast(buf, root, name, ps):
    """buf = the root's buf (root: a global rank), in place. Result: buf."""
    what = "broadcast %r" % name
    dtype, device = _check_tensor(buf, what)
    args = (name.encode(), buf.data_ptr(), buf.data_ptr(), buf.numel(), dtype, int(root), device)
    return _core.submit("kolo_broadcast_async", args, (buf,), lambda ptr: buf, what,
                        [tuple(buf.shape)], ps)


def reducescatter(src, out, name, op, ps):
    """out = this rank's shard (by rows) of the Sum or Average of src. Result: out."""
    what = "reducescatter %r" % name
    dtype, device = _check_tensor(src, what)
    rows, row_count = _rows(src)
    args = (name.encode(), src.data_ptr(), out.data_ptr(), rows, row_count, dtype, op, 1.0, 1.0,
            device)
    return _core.submit("kolo_reducescatter_async", args, (src, out), lambda ptr: out, what,
                        [tuple(src.shape)], ps)
