"""The asynchronous collectives on dense torch tensors: each starts one kolo
operation and returns its Handle (``synchronize(handle)`` or ``handle.wait()``
gives the result). Above ``_tensors``; ``sparse`` and ``mpi_ops`` (the
differentiable forms, and the public module) build on these.

Names follow Horovod: a given name becomes "<op>.<name>", and unnamed tensors get
"<op>.noname.<n>" from a per-process counter, so ranks that call in the same order
agree. Every tensor a handle touches is referenced by it until it completes.
"""

import torch

from .. import _core, _process_sets
from .._core import Average
from .._process_sets import global_process_set
from ..exceptions import KoloValueError
from ._tensors import (_check_adasum, _check_process_set, _check_tensor, _copy_out, _empty_like,
                       _finish_into, _group_sources, _in_and_out, _name, _op, _rows,
                       _split_group_output, _writable)


def _allreduce_async(tensor, output, name, op, prescale_factor, postscale_factor, ps=0):
    what = "allreduce %r" % name
    _core.require_initialized("allreduce")
    _check_adasum(op, what, ps)
    dtype, device = _check_tensor(tensor, what)
    src, buffer, copy_back = _in_and_out(tensor, output)
    args = (name.encode(), src.data_ptr(), buffer.data_ptr(), src.numel(), dtype, op,
            float(prescale_factor), float(postscale_factor), device)
    return _core.submit("kolo_allreduce_async", args, (tensor, src, buffer, output),
                        _finish_into(output, buffer, copy_back), what, [tuple(src.shape)], ps)


def allreduce_async_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                     postscale_factor=1.0, process_set=global_process_set):
    """Starts an in-place allreduce of `tensor`; synchronize() returns it."""
    ps = _check_process_set(process_set, "allreduce_async_")
    op = _op(average, op, "allreduce_async_")
    return _allreduce_async(tensor, tensor, _name("allreduce", name), op, prescale_factor,
                            postscale_factor, ps)


def _grouped_allreduce_async(tensors, outputs, name, op, prescale_factor, postscale_factor,
                             ps=0):
    what = "grouped_allreduce %r" % name
    _core.require_initialized("grouped_allreduce")
    _check_adasum(op, what, ps)
    tensors = list(tensors)
    if not tensors:
        raise KoloValueError("%s: the group is empty" % what)
    checked = [_check_tensor(t, what) for t in tensors]
    if len({d for d, _ in checked}) != 1:
        raise KoloValueError("%s: all tensors must share one dtype, got %s" % (
            what, sorted({str(t.dtype) for t in tensors})))
    srcs, buffers, copies = [], [], []
    for t, out in zip(tensors, outputs):
        src = t.detach().contiguous()
        buffer, copy_back = _writable(out)
        srcs.append(buffer if (t is out and copy_back is not None) else src)
        buffers.append(buffer)
        copies.append((copy_back, buffer))

    def finish(ptr):
        for copy_back, buffer in copies:
            if copy_back is not None:
                copy_back.copy_(buffer)
        return list(outputs)

    return _core.submit_grouped(name, [s.data_ptr() for s in srcs],
                                [b.data_ptr() for b in buffers], [s.numel() for s in srcs],
                                checked[0][0], op, prescale_factor, postscale_factor,
                                checked[0][1], (tensors, srcs, buffers, outputs), finish,
                                [tuple(s.shape) for s in srcs], ps)


def grouped_allreduce_async(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                            postscale_factor=1.0, process_set=global_process_set):
    """Starts one allreduce of a list of tensors, negotiated and reduced as a unit."""
    ps = _check_process_set(process_set, "grouped_allreduce_async")
    op = _op(average, op, "grouped_allreduce_async")
    outputs = [_empty_like(t) for t in tensors]
    return _grouped_allreduce_async(tensors, outputs, _name("grouped_allreduce", name), op,
                                    prescale_factor, postscale_factor, ps)


def grouped_allreduce_async_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                             postscale_factor=1.0, process_set=global_process_set):
    ps = _check_process_set(process_set, "grouped_allreduce_async_")
    op = _op(average, op, "grouped_allreduce_async_")
    tensors = list(tensors)
    return _grouped_allreduce_async(tensors, tensors, _name("grouped_allreduce", name), op,
                                    prescale_factor, postscale_factor, ps)


def allgather_async(tensor, name=None, process_set=global_process_set):
    """Starts an allgather along the first dimension; ranks may differ in it."""
    ps = _check_process_set(process_set, "allgather_async")
    name = _name("allgather", name)
    what = "allgather %r" % name
    _core.require_initialized("allgather")
    dtype, device = _check_tensor(tensor, what)
    src = tensor.detach().contiguous()
    rows, row_count = _rows(src)
    gathered = _copy_out(tensor, src.shape[1:], _process_sets.set_size(ps), what)
    args = (name.encode(), src.data_ptr(), rows, row_count, dtype, device)
    return _core.submit("kolo_allgather_async", args, (tensor, src),
                        lambda ptr: gathered(ptr)[0], what, [_core.rows_shape(src.shape)], ps)


def alltoall_async(tensor, splits=None, name=None, process_set=global_process_set):
    """Starts an alltoall; synchronize() returns (output, received_splits)."""
    ps = _check_process_set(process_set, "alltoall_async")
    name = _name("alltoall", name)
    what = "alltoall %r" % name
    _core.require_initialized("alltoall")
    dtype, device = _check_tensor(tensor, what)
    src = tensor.detach().contiguous()
    rows, row_count = _rows(src)
    nranks = _process_sets.set_size(ps)
    if isinstance(splits, torch.Tensor):
        splits = splits.tolist()
    send = _core.int64_splits(splits, nranks, rows, what)
    args = (name.encode(), src.data_ptr(), rows, row_count, send, dtype, device)
    return _core.submit("kolo_alltoall_async", args, (tensor, src, send),
                        _copy_out(tensor, src.shape[1:], nranks, what), what,
                        [_core.rows_shape(src.shape)], ps)


def _broadcast_async(tensor, output, root_rank, name, ps=0):
    what = "broadcast %r" % name
    _core.require_initialized("broadcast")
    dtype, device = _check_tensor(tensor, what)
    src, buffer, copy_back = _in_and_out(tensor, output)
    args = (name.encode(), src.data_ptr(), buffer.data_ptr(), src.numel(), dtype, int(root_rank),
            device)
    return _core.submit("kolo_broadcast_async", args, (tensor, src, buffer, output),
                        _finish_into(output, buffer, copy_back), what, [tuple(src.shape)], ps)


def broadcast_async(tensor, root_rank, name=None, process_set=global_process_set):
    ps = _check_process_set(process_set, "broadcast_async")
    output = _empty_like(tensor)
    return _broadcast_async(tensor, output, root_rank, _name("broadcast", name), ps)


def broadcast_async_(tensor, root_rank, name=None, process_set=global_process_set):
    ps = _check_process_set(process_set, "broadcast_async_")
    return _broadcast_async(tensor, tensor, root_rank, _name("broadcast", name), ps)


def reducescatter_async(tensor, name=None, op=Average, process_set=global_process_set,
                        prescale_factor=1.0, postscale_factor=1.0):
    """Starts a reducescatter (Sum or Average); synchronize() returns this rank's shard."""
    ps = _check_process_set(process_set, "reducescatter_async")
    name = _name("reducescatter", name)
    what = "reducescatter %r" % name
    _core.require_initialized("reducescatter")
    op = _core.check_reducescatter_op(op, what)
    dtype, device = _check_tensor(tensor, what)
    src = tensor.detach().contiguous()
    rows, row_count = _rows(src)
    shard = _core.reducescatter_shard_rows(rows, max(_process_sets.set_rank(ps), 0),
                                           _process_sets.set_size(ps))
    out = torch.empty((shard,) + tuple(src.shape[1:]), dtype=tensor.dtype, device=tensor.device)
    args = (name.encode(), src.data_ptr(), out.data_ptr(), rows, row_count, dtype, op,
            float(prescale_factor), float(postscale_factor), device)
    return _core.submit("kolo_reducescatter_async", args, (tensor, src, out), lambda p: out, what,
                        [tuple(src.shape)], ps)


def grouped_allgather_async(tensors, name=None, process_set=global_process_set):
    """Starts one allgather of a list of tensors (one dtype), negotiated as a unit;
    synchronize() returns the list of gathered tensors. Names are "<name>.<i>"."""
    ps = _check_process_set(process_set, "grouped_allgather")
    name = _name("grouped_allgather", name)
    what = "grouped_allgather %r" % name
    _core.require_initialized("grouped_allgather")
    srcs, dtype, device = _group_sources(tensors, what)
    shapes = [_core.rows_shape(s.shape) for s in srcs]
    finish = _split_group_output(srcs[0], shapes, _process_sets.set_size(ps), what)
    return _core.submit_grouped_rows("allgather", name, [s.data_ptr() for s in srcs], None,
                                     shapes, dtype, device, (tensors, srcs), finish,
                                     process_set=ps)


def grouped_reducescatter_async(tensors, name=None, op=Average, process_set=global_process_set,
                                prescale_factor=1.0, postscale_factor=1.0):
    """Starts one reducescatter of a list of tensors (Sum or Average), negotiated as a
    unit; synchronize() returns this rank's shards."""
    ps = _check_process_set(process_set, "grouped_reducescatter")
    name = _name("grouped_reducescatter", name)
    what = "grouped_reducescatter %r" % name
    _core.require_initialized("grouped_reducescatter")
    op = _core.check_reducescatter_op(op, what)
    srcs, dtype, device = _group_sources(tensors, what)
    shapes = [tuple(s.shape) for s in srcs]
    rank, size = max(_process_sets.set_rank(ps), 0), _process_sets.set_size(ps)
    outs = [torch.empty((_core.reducescatter_shard_rows(s.shape[0], rank, size),)
                        + tuple(s.shape[1:]), dtype=s.dtype, device=s.device)
            if s.dim() else torch.empty(0, dtype=s.dtype, device=s.device) for s in srcs]
    return _core.submit_grouped_rows("reducescatter", name, [s.data_ptr() for s in srcs],
                                     [o.data_ptr() for o in outs], shapes, dtype, device,
                                     (tensors, srcs, outs), lambda p: outs, op=op,
                                     prescale=prescale_factor, postscale=postscale_factor,
                                     process_set=ps)


def poll(handle):
    """True when the asynchronous operation has completed; never blocks."""
    return handle.poll()


def synchronize(handle):
    """Waits for the operation and returns its result (raises its error)."""
    if handle is None:
        return None
    return handle.wait()


def join(device=-1, process_set=global_process_set):
    """This rank is out of data; blocks until all (of the set) have joined. Returns the
    last rank to join. Meanwhile other ranks' allreduces see zeros from this rank."""
    return _core.join(process_set)


def barrier(process_set=global_process_set):
    _core.barrier(process_set)
