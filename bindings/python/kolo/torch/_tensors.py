"""How a torch tensor reaches kolo: dtype and device, contiguous buffers, names,
process sets and the outputs kolo allocates. The lowest layer of kolo.torch: the
collectives (``_async_ops``, ``sparse``, ``mpi_ops``) and the torch.distributed
backend build on it.

Tensors go to kolo by address (``tensor.data_ptr()``): a contiguous tensor is read
and written in place. A non-contiguous input is first made contiguous (a copy, as
Horovod does); an in-place operation on a non-contiguous tensor works on a
contiguous copy and copies the result back when it completes.

GPU tensors are handed to kolo with their device and current CUDA stream when the
NCCL transport is built; otherwise they are rejected with an UnsupportedError.
"""

import ctypes
import warnings

import torch

from .. import _core, _lib, _process_sets
from .._core import Adasum, Average, Sum
from ..exceptions import KoloError, KoloTypeError, KoloValueError, UnsupportedError


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
            raise KoloError("%s: kolo returned %d bytes, expected %d" % (
                what, nbytes, expected))
        if nbytes and tensor.device.type == "cuda":
            raw = torch.as_tensor(_DeviceBytes(addr, nbytes), device=tensor.device)
            out.view(-1).view(torch.uint8).copy_(raw)
        elif nbytes:
            ctypes.memmove(out.data_ptr(), addr, nbytes)
        return out, torch.tensor(splits, dtype=torch.int32)

    return finish


def _use_output(tensor, nranks, what, use):
    """finish() for a handle-owned output that the caller's own tensors receive
    (torch.distributed's all_gather and all_to_all): use(received, splits) runs
    while the output is still the handle's, and its result is the handle's.
    On the host `received` views kolo's output in place, so it must not outlive
    use(): no new tensor of the whole output, which would be freshly mapped
    memory on every call (in this VM its page faults cost several times the
    copy). A device output is copied out first, as _copy_out does. `use` None:
    _copy_out itself (the result is the copy and the splits)."""
    if use is None or tensor.device.type != "cpu":
        copy_out = _copy_out(tensor, tensor.shape[1:], nranks, what)
        return copy_out if use is None else lambda ptr: use(*copy_out(ptr))
    row_shape = tuple(tensor.shape[1:])

    def finish(ptr):
        addr, nbytes = _core.handle_output(ptr)
        splits = _core.handle_splits(ptr, nranks)
        shape = (sum(splits),) + row_shape
        expected = torch.Size(shape).numel() * tensor.element_size()
        if nbytes != expected:
            raise KoloError("%s: kolo returned %d bytes, expected %d" % (what, nbytes, expected))
        if nbytes:
            raw = torch.frombuffer((ctypes.c_char * nbytes).from_address(addr), dtype=torch.uint8)
            received = raw.view(tensor.dtype).view(shape)
        else:
            received = tensor.new_empty(shape)
        return use(received, torch.tensor(splits, dtype=torch.int32))

    return finish


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
            raise KoloError("%s: kolo returned %d bytes, expected %d" % (
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
