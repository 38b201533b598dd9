"""The collectives on torch tensors, with horovod.torch's names and semantics.

Tensors go to kolo by address (``tensor.data_ptr()``): a contiguous tensor is read
and written in place. A non-contiguous input is first made contiguous (a copy, as
Horovod does); an in-place operation on a non-contiguous tensor works on a
contiguous copy and copies the result back when it completes.

Names follow Horovod: a given name becomes "<op>.<name>", and unnamed tensors get
"<op>.noname.<n>" from a per-process counter, so ranks that call in the same order
agree. Every tensor a handle touches is referenced by it until it completes.

GPU tensors are handed to kolo with their device and current CUDA stream when the
NCCL transport is built; otherwise they are rejected with an UnsupportedError.
"""

import ctypes
import warnings

import torch

from .. import _core, _lib
from .. import _process_sets
from .._core import Adasum, Average, Sum
from .._process_sets import ProcessSet, global_process_set  # noqa: F401 (re-exported)
from ..exceptions import KoloTypeError, KoloValueError, UnsupportedError
from .sparse import sparse_allreduce_async

_DTYPES = {
    torch.uint8: _lib.UINT8,
    torch.int8: _lib.INT8,
    torch.int16: _lib.INT16,
    torch.int32: _lib.INT32,
    torch.int64: _lib.INT64,
    torch.float16: _lib.FLOAT16,
    torch.bfloat16: _lib.BFLOAT16,
    torch.float32: _lib.FLOAT32,
    torch.float64: _lib.FLOAT64,
    torch.bool: _lib.BOOL,
}


def _check_process_set(process_set, what="kolo.torch"):
    """The id of ``process_set`` (see kolo._process_sets)."""
    return _process_sets.set_id(process_set, what)


def _op(average, op, what):
    """Horovod's (deprecated) `average` flag and `op`, resolved to one kolo op."""
    if average is not None:
        if op is not None:
            raise KoloValueError("%s: pass either op or average, not both" % what)
        warnings.warn("Parameter `average` has been replaced with `op` and will be removed",
                      DeprecationWarning, stacklevel=3)
        return Average if average else Sum
    return _core.check_op(Average if op is None else op)


def _check_adasum(op, what, ps=0):
    """Horovod's own checks, made before anything starts: Adasum pairs ranks in a
    binary tree, so it needs a power-of-two world, and (as in Horovod) the global
    process set: NotImplementedError. Its other limits (floating dtypes, CPU
    tensors) are the core's: an UnsupportedError naming why."""
    if op == Adasum and ps:
        raise NotImplementedError("%s: Adasum does not support non-global process sets yet" % what)
    n = _core.size()
    if op == Adasum and n & (n - 1):
        raise NotImplementedError("%s: Running Adasum with non-power of 2 ranks is not supported "
                                  "yet (this world has %d ranks)" % (what, n))


def _name(kind, name):
    return _core.op_name(kind, None) if name is None else "%s.%s" % (kind, _core.op_name(kind, name))


def _kolo_dtype(tensor, what):
    dtype = _DTYPES.get(tensor.dtype)
    if dtype is None:
        raise KoloValueError("%s: dtype %s is not supported (supported: %s)" % (
            what, tensor.dtype, ", ".join(str(d) for d in _DTYPES)))
    return dtype


def _device(tensor, what):
    if tensor.device.type == "cpu":
        return _lib.CPU_DEVICE
    if tensor.device.type == "cuda":
        built, reason = _core.transport_built("nccl")
        if not built:
            raise UnsupportedError(
                "%s: the tensor is on %s, but this libkolo (%s) was built without the NCCL "
                "transport (%s); move the tensor to the CPU or build kolo with NCCL" % (
                    what, tensor.device, _lib.load().path, reason or "not built"))
        stream = torch.cuda.current_stream(tensor.device).cuda_stream
        return _lib.Device(_lib.DEVICE_CUDA, tensor.device.index, stream)
    raise KoloValueError("%s: tensors on %s are not supported (CPU or CUDA only)" % (
        what, tensor.device))


def _check_tensor(tensor, what):
    if not isinstance(tensor, torch.Tensor):
        raise KoloTypeError("%s: expected a torch.Tensor, got %s" % (what, type(tensor).__name__))
    if tensor.layout != torch.strided:
        raise KoloValueError("%s: sparse tensors are not supported here (allreduce and "
                             "allreduce_async take them; the result is a new tensor)" % what)
    return _kolo_dtype(tensor, what), _device(tensor, what)


def _is_sparse(tensor):
    return isinstance(tensor, torch.Tensor) and tensor.layout != torch.strided


def _empty_like(tensor):
    """A contiguous output for `tensor`, after checking that kolo can take it."""
    _check_tensor(tensor, "kolo.torch")
    return torch.empty_like(tensor, memory_format=torch.contiguous_format)


def _rows(tensor):
    if tensor.dim() == 0:
        return 1, 1
    row_count = 1
    for d in tensor.shape[1:]:
        row_count *= d
    return tensor.shape[0], row_count


def _writable(output):
    """(buffer to write, copy-back) for an output tensor that may be non-contiguous."""
    if output.is_contiguous():
        return output, None
    return output.contiguous(), output


def _in_and_out(tensor, output):
    """(src, buffer, copy_back) for an operation reading `tensor` and writing `output`:
    the contiguous input, the buffer to write and, for a non-contiguous output, the
    tensor to copy it back into. In place on a non-contiguous tensor, kolo reads and
    writes the same contiguous copy."""
    src = tensor.detach().contiguous()
    buffer, copy_back = _writable(output)
    if tensor is output and copy_back is not None:
        src = buffer
    return src, buffer, copy_back


def _finish_into(output, buffer, copy_back):
    def finish(ptr):
        if copy_back is not None:
            copy_back.copy_(buffer)
        return output
    return finish


# ---- allreduce -----------------------------------------------------------------------

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


def allreduce_async(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                    postscale_factor=1.0, process_set=global_process_set):
    """Starts an allreduce of `tensor` into a new tensor; synchronize() returns it.
    A sparse COO tensor is allgathered (indices and values) as in Horovod: see
    kolo.torch.sparse."""
    ps = _check_process_set(process_set, "allreduce_async")
    op = _op(average, op, "allreduce_async")
    if _is_sparse(tensor):
        return sparse_allreduce_async(tensor, name, op, prescale_factor, postscale_factor,
                                      process_set)
    output = _empty_like(tensor)
    return _allreduce_async(tensor, output, _name("allreduce", name), op, prescale_factor,
                            postscale_factor, ps)


def allreduce_async_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                     postscale_factor=1.0, process_set=global_process_set):
    """Starts an in-place allreduce of `tensor`; synchronize() returns it."""
    ps = _check_process_set(process_set, "allreduce_async_")
    op = _op(average, op, "allreduce_async_")
    return _allreduce_async(tensor, tensor, _name("allreduce", name), op, prescale_factor,
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
        return sparse_allreduce_async(tensor, name, op, prescale_factor,
                                      postscale_factor, process_set).wait()
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


# ---- grouped allreduce ---------------------------------------------------------------

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


# ---- allgather, alltoall: outputs sized by the negotiation ---------------------------

class _DeviceBytes:
    """kolo's device output as raw bytes, for torch.as_tensor (CUDA array interface)."""

    def __init__(self, addr, nbytes):
        self.__cuda_array_interface__ = {
            "shape": (nbytes,), "typestr": "|u1", "data": (addr, False), "version": 2}


def _copy_out(tensor, row_shape, nranks, what):
    """finish() for a handle-owned output: copies it into a new tensor on the input's
    device (kolo frees its own output when the handle is released). A CUDA output is
    complete once the handle is (kolo.h), so the copy may run on any stream."""

    def finish(ptr):
        addr, nbytes = _core.handle_output(ptr)
        splits = _core.handle_splits(ptr, nranks)
        out = torch.empty((sum(splits),) + tuple(row_shape), dtype=tensor.dtype,
                          device=tensor.device)
        expected = out.numel() * out.element_size()
        if nbytes != expected:
            raise _core.KoloError("%s: kolo returned %d bytes, expected %d" % (
                what, nbytes, expected))
        if nbytes and tensor.device.type == "cuda":
            raw = torch.as_tensor(_DeviceBytes(addr, nbytes), device=tensor.device)
            out.view(-1).view(torch.uint8).copy_(raw)
        elif nbytes:
            ctypes.memmove(out.data_ptr(), addr, nbytes)
        return out, torch.tensor(splits, dtype=torch.int32)

    return finish


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


# ---- broadcast -----------------------------------------------------------------------

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


# ---- reducescatter -------------------------------------------------------------------

def reducescatter_async(tensor, op=Average, name=None, prescale_factor=1.0,
                        postscale_factor=1.0, process_set=global_process_set):
    """Starts a reducescatter (Sum or Average); synchronize() returns this rank's shard."""
    ps = _check_process_set(process_set, "reducescatter_async")
    name = _name("reducescatter", name)
    what = "reducescatter %r" % name
    _core.require_initialized("reducescatter")
    op = _core.check_op(op, (Sum, Average))
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


class HorovodReducescatter(torch.autograd.Function):
    """Reducescatter; the gradient is the allgather of the shards' gradients."""

    @staticmethod
    def forward(ctx, tensor, op, name, prescale_factor, postscale_factor, process_set):
        size = _process_sets.set_size(_check_process_set(process_set, "reducescatter"))
        ctx.scale = prescale_factor * postscale_factor / (size if op == Average else 1)
        ctx.process_set = process_set
        return reducescatter_async(tensor, op, name, prescale_factor, postscale_factor,
                                   process_set).wait()

    @staticmethod
    def backward(ctx, grad_output):
        grad = allgather(grad_output, process_set=ctx.process_set)
        if ctx.scale != 1.0:
            grad = grad * ctx.scale
        return grad, None, None, None, None, None


def reducescatter(tensor, op=Average, name=None, prescale_factor=1.0, postscale_factor=1.0,
                  process_set=global_process_set):
    """Reduces `tensor` over ranks and returns this rank's shard of the first dimension
    (differentiable)."""
    _check_process_set(process_set, "reducescatter")
    return HorovodReducescatter.apply(tensor, op, name, prescale_factor, postscale_factor,
                                      process_set)


# ---- grouped allgather and reducescatter ---------------------------------------------

def _grad_name(name, what):
    """The name of a backward collective: derived from the forward's when it has one,
    so that ranks outside a process set, which make no backward calls, do not shift
    the members' unnamed-op counter (Horovod leaves backward ops unnamed)."""
    return None if name is None else "%s.%s" % (name, what)


def _group_sources(tensors, what):
    """(contiguous sources, dtype, device) of a group's tensors: one dtype, one device."""
    tensors = list(tensors)
    if not tensors:
        raise KoloValueError("%s: the group is empty" % what)
    checked = [_check_tensor(t, what) for t in tensors]
    if len({d for d, _ in checked}) != 1:
        raise KoloValueError("%s: all tensors must share one dtype, got %s" % (
            what, sorted({str(t.dtype) for t in tensors})))
    if len({str(t.device) for t in tensors}) != 1:
        raise KoloValueError("%s: all tensors must be on one device, got %s" % (
            what, sorted({str(t.device) for t in tensors})))
    return [t.detach().contiguous() for t in tensors], checked[0][0], checked[0][1]


def _split_group_output(like, shapes, nranks, what):
    """finish() for a grouped allgather: the handle's output is member 0's gathered
    rows, then member 1's, ... (kolo.h); each becomes a tensor of its own."""

    def finish(ptr):
        addr, nbytes = _core.handle_output(ptr)
        splits = _core.handle_splits(ptr, nranks * len(shapes))
        outs = [torch.empty((sum(splits[m * nranks:(m + 1) * nranks]),) + tuple(shape[1:]),
                            dtype=like.dtype, device=like.device)
                for m, shape in enumerate(shapes)]
        expected = sum(o.numel() * o.element_size() for o in outs)
        if nbytes != expected:
            raise _core.KoloError("%s: kolo returned %d bytes, expected %d" % (
                what, nbytes, expected))
        raw = None
        if nbytes and like.device.type == "cuda":
            raw = torch.as_tensor(_DeviceBytes(addr, nbytes), device=like.device)
        offset = 0
        for o in outs:
            size = o.numel() * o.element_size()
            if size and raw is not None:
                o.view(-1).view(torch.uint8).copy_(raw[offset:offset + size])
            elif size:
                ctypes.memmove(o.data_ptr(), addr + offset, size)
            offset += size
        return outs

    return finish


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


def grouped_reducescatter_async(tensors, op=Average, name=None, prescale_factor=1.0,
                                postscale_factor=1.0, process_set=global_process_set):
    """Starts one reducescatter of a list of tensors (Sum or Average), negotiated as a
    unit; synchronize() returns this rank's shards."""
    ps = _check_process_set(process_set, "grouped_reducescatter")
    name = _name("grouped_reducescatter", name)
    what = "grouped_reducescatter %r" % name
    _core.require_initialized("grouped_reducescatter")
    op = _core.check_op(op, (Sum, Average))
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


class HorovodGroupedReducescatter(torch.autograd.Function):
    """Grouped reducescatter; each member's gradient is the allgather of its shard's
    gradient, scaled as HorovodReducescatter's."""

    @staticmethod
    def forward(ctx, op, name, prescale_factor, postscale_factor, process_set, *tensors):
        size = _process_sets.set_size(_check_process_set(process_set, "grouped_reducescatter"))
        ctx.scale = prescale_factor * postscale_factor / (size if op == Average else 1)
        ctx.process_set = process_set
        ctx.name = name
        return tuple(grouped_reducescatter_async(list(tensors), op, name, prescale_factor,
                                                 postscale_factor, process_set).wait())

    @staticmethod
    def backward(ctx, *grads):
        gathered = grouped_allgather([g.contiguous() for g in grads],
                                     name=_grad_name(ctx.name, "grad"), process_set=ctx.process_set)
        if ctx.scale != 1.0:
            gathered = [g * ctx.scale for g in gathered]
        return (None, None, None, None, None) + tuple(gathered)


def grouped_reducescatter(tensors, op=Average, name=None, prescale_factor=1.0,
                          postscale_factor=1.0, process_set=global_process_set):
    """Reducescatter of a list of tensors as one unit (differentiable); returns this
    rank's shard of each."""
    _check_process_set(process_set, "grouped_reducescatter")
    return list(HorovodGroupedReducescatter.apply(op, name, prescale_factor, postscale_factor,
                                                  process_set, *list(tensors)))


# ---- handles and synchronisation -----------------------------------------------------

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
