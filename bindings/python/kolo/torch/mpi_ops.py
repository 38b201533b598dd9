"""The collectives on torch tensors, with horovod.torch's names and semantics: the
public module. The asynchronous starts come from ``_async_ops`` (re-exported
here), sparse allreduce from ``sparse``; this module adds the differentiable
forms (autograd Functions) and the dispatch of sparse tensors.
"""

import torch

from .. import _core, _process_sets
from .._core import Average, Sum
from .._process_sets import ProcessSet, global_process_set  # noqa: F401 (re-exported)
# Re-exported: every asynchronous start, poll, synchronize, join and barrier.
from ._async_ops import (_allreduce_async, _broadcast_async, _grouped_allreduce_async,  # noqa
                         allgather_async, allreduce_async_, alltoall_async, barrier,
                         broadcast_async, broadcast_async_, grouped_allgather_async,
                         grouped_allreduce_async, grouped_allreduce_async_,
                         grouped_reducescatter_async, join, poll, reducescatter_async,
                         synchronize)
from ._tensors import _check_process_set, _empty_like, _grad_name, _is_sparse, _name, _op
from .sparse import sparse_allreduce_async


def allreduce_async(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                    postscale_factor=1.0, process_set=global_process_set):
    """Starts an allreduce of `tensor` into a new tensor; synchronize() returns it.
    A sparse COO tensor is allgathered (indices and values) as in Horovod: see
    kolo.torch.sparse."""
    ps = _check_process_set(process_set, "allreduce_async")
    op = _op(average, op, "allreduce_async")
    if _is_sparse(tensor):
        return sparse_allreduce_async(tensor, name, op, process_set, prescale_factor,
                                      postscale_factor)
    output = _empty_like(tensor)
    return _allreduce_async(tensor, output, _name("allreduce", name), op, prescale_factor,
                            postscale_factor, ps)


class HorovodAllreduce(torch.autograd.Function):
    """Allreduce whose gradient is the allreduce (same op and factors) of the gradient."""

    @staticmethod
    def forward(ctx, tensor, name, op, prescale_factor, postscale_factor, process_set):
        ctx.op, ctx.prescale, ctx.postscale = op, prescale_factor, postscale_factor
        ctx.process_set = process_set
        ps = _check_process_set(process_set, "allreduce")
        output = _empty_like(tensor)
        return _allreduce_async(tensor, output, _name("allreduce", name), op, prescale_factor,
                                postscale_factor, ps).wait()

    @staticmethod
    def backward(ctx, grad_output):
        grad = allreduce(grad_output, op=ctx.op, prescale_factor=ctx.prescale,
                         postscale_factor=ctx.postscale, process_set=ctx.process_set)
        return grad, None, None, None, None, None


def allreduce(tensor, average=None, name=None, compression=None, op=None, prescale_factor=1.0,
              postscale_factor=1.0, process_set=global_process_set):
    """Allreduce of `tensor` into a new tensor (differentiable). `compression` (e.g.
    Compression.fp16) compresses for the wire and decompresses the result. A sparse
    COO tensor gives a sparse result (not differentiable, not compressed), as
    allreduce_async does."""
    _check_process_set(process_set, "allreduce")
    op = _op(average, op, "allreduce")
    if _is_sparse(tensor):
        return sparse_allreduce_async(tensor, name, op, process_set, prescale_factor,
                                      postscale_factor)()
    if compression is not None:
        compressed, ctx = compression.compress(tensor)
        summed = HorovodAllreduce.apply(compressed, name, op, prescale_factor, postscale_factor,
                                        process_set)
        return compression.decompress(summed, ctx)
    return HorovodAllreduce.apply(tensor, name, op, prescale_factor, postscale_factor,
                                  process_set)


def allreduce_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
               postscale_factor=1.0, process_set=global_process_set):
    """In-place allreduce of `tensor`; returns it."""
    return allreduce_async_(tensor, average, name, op, prescale_factor, postscale_factor,
                            process_set).wait()


class HorovodGroupedAllreduce(torch.autograd.Function):
    @staticmethod
    def forward(ctx, name, op, prescale_factor, postscale_factor, process_set, *tensors):
        ctx.op, ctx.prescale, ctx.postscale = op, prescale_factor, postscale_factor
        ctx.process_set = process_set
        ps = _check_process_set(process_set, "grouped_allreduce")
        outputs = [_empty_like(t) for t in tensors]
        return tuple(_grouped_allreduce_async(tensors, outputs, _name("grouped_allreduce", name),
                                              op, prescale_factor, postscale_factor, ps).wait())

    @staticmethod
    def backward(ctx, *grads):
        reduced = grouped_allreduce(list(grads), op=ctx.op, prescale_factor=ctx.prescale,
                                    postscale_factor=ctx.postscale, process_set=ctx.process_set)
        return (None, None, None, None, None) + tuple(reduced)


def grouped_allreduce(tensors, average=None, name=None, compression=None, op=None,
                      prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set):
    """Allreduce of a list of tensors as one unit (differentiable); returns a list."""
    _check_process_set(process_set, "grouped_allreduce")
    op = _op(average, op, "grouped_allreduce")
    tensors = list(tensors)
    if compression is not None:
        pairs = [compression.compress(t) for t in tensors]
        reduced = HorovodGroupedAllreduce.apply(name, op, prescale_factor, postscale_factor,
                                                process_set, *[p[0] for p in pairs])
        return [compression.decompress(r, ctx) for r, (_, ctx) in zip(reduced, pairs)]
    return list(HorovodGroupedAllreduce.apply(name, op, prescale_factor, postscale_factor,
                                              process_set, *tensors))


def grouped_allreduce_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                       postscale_factor=1.0, process_set=global_process_set):
    return grouped_allreduce_async_(tensors, average, name, op, prescale_factor,
                                    postscale_factor, process_set).wait()


class HorovodAllgather(torch.autograd.Function):
    """Allgather; the gradient of this rank's rows is its slice of the averaged gradient."""

    @staticmethod
    def forward(ctx, tensor, name, process_set):
        ctx.dim = tensor.shape[0] if tensor.dim() else 1
        ctx.process_set = process_set
        return allgather_async(tensor, name, process_set).wait()

    @staticmethod
    def backward(ctx, grad_output):
        ps = ctx.process_set
        grad_reduced = allreduce(grad_output, op=Average, process_set=ps)
        dims = allgather(torch.tensor([ctx.dim], dtype=torch.int64), process_set=ps)
        me = _process_sets.set_rank(_check_process_set(ps, "allgather"))
        offset = int(dims[:me].sum())
        return grad_reduced.narrow(0, offset, ctx.dim), None, None


def allgather(tensor, name=None, process_set=global_process_set):
    """Every rank's tensor concatenated along the first dimension (differentiable)."""
    _check_process_set(process_set, "allgather")
    return HorovodAllgather.apply(tensor, name, process_set)


class HorovodAlltoall(torch.autograd.Function):
    """Alltoall; the gradient travels back by the alltoall with the received splits."""

    @staticmethod
    def forward(ctx, tensor, splits, name, process_set):
        output, received = alltoall_async(tensor, splits, name, process_set).wait()
        ctx.received = received
        ctx.process_set = process_set
        if splits is None:
            return output
        ctx.mark_non_differentiable(received)
        return output, received

    @staticmethod
    def backward(ctx, grad_output, *unused):
        grad, _ = alltoall(grad_output, splits=ctx.received, process_set=ctx.process_set)
        return grad, None, None, None


def alltoall(tensor, splits=None, name=None, process_set=global_process_set):
    """Scatters rows (splits[d] to rank d; an even split by default) and gathers what
    every rank sent here. Returns the output, plus the received splits when `splits`
    was given (differentiable)."""
    _check_process_set(process_set, "alltoall")
    return HorovodAlltoall.apply(tensor, splits, name, process_set)


class HorovodBroadcast(torch.autograd.Function):
    """Broadcast; the root's gradient is the average of every rank's, others get zero."""

    @staticmethod
    def forward(ctx, tensor, root_rank, name, process_set):
        ctx.root_rank = root_rank
        ctx.process_set = process_set
        ps = _check_process_set(process_set, "broadcast")
        output = _empty_like(tensor)
        return _broadcast_async(tensor, output, root_rank, _name("broadcast", name), ps).wait()

    @staticmethod
    def backward(ctx, grad_output):
        grad = allreduce(grad_output, op=Average, process_set=ctx.process_set)
        if _core.rank() != ctx.root_rank:
            grad = grad * 0
        return grad, None, None, None


def broadcast(tensor, root_rank, name=None, process_set=global_process_set):
    """root_rank's tensor, on every rank, as a new tensor (differentiable)."""
    _check_process_set(process_set, "broadcast")
    return HorovodBroadcast.apply(tensor, root_rank, name, process_set)


def broadcast_(tensor, root_rank, name=None, process_set=global_process_set):
    """Broadcasts root_rank's tensor into `tensor` in place; returns it."""
    return broadcast_async_(tensor, root_rank, name, process_set).wait()


def _reducescatter_grad_scale(op, process_set, prescale_factor, postscale_factor):
    """Horovod's factor on a reducescatter's gradient (the allgather of the shards'
    gradients): the set's size for Sum, 1 for Average, times both scale factors."""
    size = _process_sets.set_size(_check_process_set(process_set, "reducescatter"))
    return (size if op == Sum else 1) * prescale_factor * postscale_factor


class HorovodReducescatter(torch.autograd.Function):
    """Reducescatter; the gradient is the allgather of the shards' gradients, scaled
    as Horovod scales it (_reducescatter_grad_scale)."""

    @staticmethod
    def forward(ctx, tensor, name, op, process_set, prescale_factor, postscale_factor):
        ctx.scale = _reducescatter_grad_scale(op, process_set, prescale_factor, postscale_factor)
        ctx.process_set = process_set
        return reducescatter_async(tensor, name, op, process_set, prescale_factor,
                                   postscale_factor).wait()

    @staticmethod
    def backward(ctx, grad_output):
        if ctx.scale != 1.0:
            grad_output = grad_output * ctx.scale
        return allgather(grad_output, process_set=ctx.process_set), None, None, None, None, None


def reducescatter(tensor, name=None, compression=None, op=Average,
                  process_set=global_process_set, prescale_factor=1.0, postscale_factor=1.0):
    """Reduces `tensor` over ranks (Sum or Average; another op raises a RuntimeError,
    as in Horovod) and returns this rank's shard of the first dimension
    (differentiable). `compression` compresses for the wire."""
    _check_process_set(process_set, "reducescatter")
    _core.check_reducescatter_op(op, "reducescatter")
    ctx = None
    if compression is not None:
        tensor, ctx = compression.compress(tensor)
    out = HorovodReducescatter.apply(tensor, name, op, process_set, prescale_factor,
                                     postscale_factor)
    return out if compression is None else compression.decompress(out, ctx)


class HorovodGroupedAllgather(torch.autograd.Function):
    """Grouped allgather; each member's gradient is its rows of the averaged gradient
    (as HorovodAllgather's)."""

    @staticmethod
    def forward(ctx, name, process_set, *tensors):
        ctx.dims = [t.shape[0] if t.dim() else 1 for t in tensors]
        ctx.process_set = process_set
        ctx.name = name
        return tuple(grouped_allgather_async(list(tensors), name, process_set).wait())

    @staticmethod
    def backward(ctx, *grads):
        ps = ctx.process_set
        reduced = grouped_allreduce([g.contiguous() for g in grads], op=Average,
                                    name=_grad_name(ctx.name, "grad"), process_set=ps)
        dims = grouped_allgather([torch.tensor([d], dtype=torch.int64) for d in ctx.dims],
                                 name=_grad_name(ctx.name, "dims"), process_set=ps)
        r = _process_sets.set_rank(_check_process_set(ps, "grouped_allgather"))
        return (None, None) + tuple(g.narrow(0, int(d[:r].sum()), dim)
                                    for g, d, dim in zip(reduced, dims, ctx.dims))


def grouped_allgather(tensors, name=None, process_set=global_process_set):
    """Allgather of a list of tensors as one unit (differentiable); returns a list."""
    _check_process_set(process_set, "grouped_allgather")
    return list(HorovodGroupedAllgather.apply(name, process_set, *list(tensors)))


class HorovodGroupedReducescatter(torch.autograd.Function):
    """Grouped reducescatter; each member's gradient is the allgather of its shard's
    gradient, scaled as HorovodReducescatter's."""

    @staticmethod
    def forward(ctx, name, op, process_set, prescale_factor, postscale_factor, *tensors):
        ctx.scale = _reducescatter_grad_scale(op, process_set, prescale_factor, postscale_factor)
        ctx.process_set = process_set
        ctx.name = name
        return tuple(grouped_reducescatter_async(list(tensors), name, op, process_set,
                                                 prescale_factor, postscale_factor).wait())

    @staticmethod
    def backward(ctx, *grads):
        if ctx.scale != 1.0:
            grads = [g * ctx.scale for g in grads]
        gathered = grouped_allgather([g.contiguous() for g in grads],
                                     name=_grad_name(ctx.name, "grad"), process_set=ctx.process_set)
        return (None, None, None, None, None) + tuple(gathered)


def grouped_reducescatter(tensors, name=None, compression=None, op=Average,
                          process_set=global_process_set, prescale_factor=1.0,
                          postscale_factor=1.0):
    """Reducescatter of a list of tensors as one unit (differentiable); returns this
    rank's shard of each."""
    _check_process_set(process_set, "grouped_reducescatter")
    _core.check_reducescatter_op(op, "grouped_reducescatter")
    tensors = list(tensors)
    ctxs = [None] * len(tensors)
    if compression is not None:
        pairs = [compression.compress(t) for t in tensors]
        tensors, ctxs = [p[0] for p in pairs], [p[1] for p in pairs]
    out = list(HorovodGroupedReducescatter.apply(name, op, process_set, prescale_factor,
                                                 postscale_factor, *tensors))
    if compression is None:
        return out
    return [compression.decompress(o, c) for o, c in zip(out, ctxs)]
