"""Allreduce of sparse (COO) tensors, as Horovod does it: every rank's indices and
values are allgathered, and the result is the sparse tensor of all of them together.

A COO tensor is (indices, values): ``indices`` is [sparse_dim, nnz], ``values`` is
[nnz, *dense_dims]. Allgather concatenates along the first dimension, so the indices
travel transposed ([nnz, sparse_dim]) and come back transposed. Ranks may hold
different numbers of entries (zero too). The sum of sparse tensors is the tensor of
the concatenated entries, since a COO tensor sums its duplicate indices; the result
is left uncoalesced, as Horovod leaves it (``.coalesce()`` merges the duplicates).
Average divides the values by the number of ranks (an integer tensor is coalesced
first and divided rounding toward zero, as a dense integer average is).

Only Sum and Average have this form; other ops are refused. The result is a new
tensor (no in-place variant) and is not differentiable, as in Horovod. This module
sits under the ops it uses: it takes allgather_async from ``_async_ops``, and
``mpi_ops`` (which hands sparse tensors here) imports it.
"""

import torch

from .. import _core, _process_sets
from .._core import Average, Sum
from .._process_sets import global_process_set
from ..exceptions import KoloValueError
from ._async_ops import allgather_async


class SparseHandle:
    """The two allgathers (indices, values) of one sparse allreduce, as one handle.
    As in Horovod it is called: ``handle()`` waits and returns the reduced sparse
    tensor. It is also a kolo Handle: poll(), wait() (the same result) and
    ``synchronize(handle)``."""

    def __init__(self, indices_handle, values_handle, finish):
        self._handles = (indices_handle, values_handle)
        self._finish = finish
        self._done = False
        self._result = None

    def __call__(self):
        return self.wait()

    def poll(self):
        return all(h.poll() for h in self._handles)

    def wait(self, timeout=None):
        if not self._done:
            indices, values = (h.wait(timeout) for h in self._handles)
            self._result = self._finish(indices, values)
            self._done = True
        return self._result

    def done(self):
        return self._done


def check_sparse(tensor, op, what):
    if tensor.layout != torch.sparse_coo:
        raise KoloValueError("%s: sparse layout %s is not supported (COO only: "
                             "tensor.to_sparse())" % (what, tensor.layout))
    if op not in (Sum, Average):
        raise KoloValueError("%s: a sparse tensor is reduced by Sum or Average only, not %s" % (
            what, _core._OP_NAMES.get(op, op)))


def sparse_allreduce_async(tensor, name=None, op=Average, process_set=global_process_set,
                           prescale_factor=1.0, postscale_factor=1.0):
    """Starts the allreduce of a sparse COO `tensor` (horovod.torch's
    sparse_allreduce_async, whose arguments come first in its order); returns a
    SparseHandle: ``handle()`` gives the reduced sparse tensor. The allgathers are
    named "allgather.<name>.indices" and "allgather.<name>.values"."""
    base = _core.op_name("sparse_allreduce", name)
    what = "sparse allreduce %r" % base
    _core.require_initialized("allreduce")
    check_sparse(tensor, op, what)
    values = tensor._values()
    if (prescale_factor != 1.0 or postscale_factor != 1.0) and not values.is_floating_point():
        raise KoloValueError("%s: scale factors on a sparse %s tensor are not supported" % (
            what, values.dtype))
    if prescale_factor != 1.0:
        values = values * prescale_factor
    indices_handle = allgather_async(tensor._indices().t().contiguous(), name=base + ".indices",
                                     process_set=process_set)
    values_handle = allgather_async(values.contiguous(), name=base + ".values",
                                    process_set=process_set)
    shape = tensor.shape
    size = _process_sets.set_size(_process_sets.set_id(process_set, what))

    def finish(indices, gathered):
        result = torch.sparse_coo_tensor(indices.t(), gathered, shape)
        if op == Average:
            if result.dtype.is_floating_point:
                result = torch.sparse_coo_tensor(indices.t(), gathered / size, shape)
            else:
                result = result.coalesce()
                result = torch.sparse_coo_tensor(
                    result.indices(), torch.div(result.values(), size, rounding_mode="trunc"),
                    shape)
        if postscale_factor != 1.0:
            result = result * postscale_factor
        return result

    return SparseHandle(indices_handle, values_handle, finish)
