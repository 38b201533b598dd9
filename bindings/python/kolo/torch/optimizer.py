"""DistributedOptimizer: horovod.torch's gradient averaging around any torch optimizer.

How it works (as in Horovod): a hook on each parameter's gradient accumulator fires
when backward has produced that parameter's gradient and starts its allreduce at
once, so communication overlaps the rest of backward. step() (or synchronize())
waits for every handle, writes the averaged gradients back into ``p.grad`` and
runs the wrapped optimizer's step.

- Gradients are named after the parameters ("allreduce.<name>"); kolo negotiates
  by name, so ranks may produce gradients in different orders.
- ``backward_passes_per_step=k``: the allreduce starts on the k-th backward pass
  since the last step; the k local gradients are summed by autograd meanwhile.
- ``op=Average`` with ``gradient_predivide_factor=f`` scales by 1/f before the sum
  and by f/size after it; ``compression`` compresses each gradient for the wire.
- A parameter whose gradient never appeared (unused in this step's graph) is
  still reduced, with zeros, at step(): other ranks may have used it.
- A sparse gradient (nn.Embedding(sparse=True)) is reduced as Horovod does: its
  indices and values are allgathered (kolo.torch.sparse) and p.grad becomes the
  sparse result, uncompressed. With ``sparse_as_dense=True`` it is made dense first,
  reduced like any other gradient and made sparse again before the update (as in
  Horovod), so optimizers that take only sparse gradients (SparseAdam) work. As in Horovod, a rank on which such a
  parameter got no gradient contributes dense zeros, which cannot meet the other
  ranks' allgathers: use sparse_as_dense=True when a sparse parameter may go unused.
- ``op=Adasum`` (on more than one rank) is Horovod's delta optimizer instead:
  adasum_optimizer.py. Both derive from _optimizer_base._HookedOptimizer.
"""

import contextlib
import warnings

import torch

from .. import _core
from .._core import Adasum, Average
from ..exceptions import KoloValueError
from ._async_ops import allreduce_async_, synchronize
from ._optimizer_base import _HookedOptimizer, wrap
from ._tensors import _check_adasum
from .adasum_optimizer import _DistributedAdasumOptimizer
from .compression import Compression
from .mpi_ops import global_process_set
from .sparse import sparse_allreduce_async


class _DistributedOptimizer(_HookedOptimizer):
    def __init__(self, params, named_parameters, compression, backward_passes_per_step=1,
                 op=Average, gradient_predivide_factor=1.0, groups=None, sparse_as_dense=False,
                 process_set=global_process_set):
        super().__init__(params)
        self.op = op
        self.gradient_predivide_factor = gradient_predivide_factor
        self.sparse_as_dense = sparse_as_dense
        self.process_set = process_set
        self._synchronized = False
        self._should_synchronize = True
        self._init_hooks(named_parameters, compression, backward_passes_per_step)

    def _allreduce_grad_async(self, p):
        if p.grad is None:
            # Unused here, but another rank may have used it: contribute zeros.
            p.grad = torch.zeros_like(p)
        if self.op == Average:
            prescale, postscale = 1.0 / self.gradient_predivide_factor, self.gradient_predivide_factor
        else:
            prescale, postscale = 1.0, 1.0
        name = self._parameter_names.get(p)
        grad = p.grad
        if grad.is_sparse:
            if not self.sparse_as_dense:
                return sparse_allreduce_async(grad, name, self.op, self.process_set, prescale,
                                              postscale), None
            grad = grad.to_dense()  # reduced in place; synchronize() makes it p.grad
        compressed, ctx = self._compression.compress(grad)
        handle = allreduce_async_(compressed, name=name, op=self.op,
                                  prescale_factor=prescale, postscale_factor=postscale,
                                  process_set=self.process_set)
        return handle, ctx

    def synchronize(self):
        """Waits for every gradient's allreduce and writes the results into p.grad."""
        for p in self._missing_in_order():
            self._handles[p] = self._allreduce_grad_async(p)
        for p, (handle, ctx) in list(self._handles.items()):
            if handle is None:
                self._handles[p] = self._allreduce_grad_async(p)
        try:
            for p, (handle, ctx) in self._handles.items():
                output = synchronize(handle)
                self._allreduce_delay[p] = self.backward_passes_per_step
                if not output.is_sparse:
                    output = self._compression.decompress(output, ctx)
                if p.grad.is_sparse:
                    # As Horovod: the wrapped optimizer gets a sparse gradient for a
                    # sparse parameter; sparse_as_dense reduced it densely.
                    p.grad = output if output.is_sparse else output.to_sparse()
                else:
                    p.grad.set_(output)
        finally:
            self._handles.clear()
        self._synchronized = True

    @contextlib.contextmanager
    def skip_synchronize(self):
        """Within it, step() does not synchronize (call synchronize() yourself first)."""
        self._should_synchronize = False
        try:
            yield
        finally:
            self._should_synchronize = True

    def step(self, closure=None):
        if self._should_synchronize:
            if self._synchronized:
                warnings.warn("optimizer.step() called without optimizer.skip_synchronize() "
                              "context after optimizer.synchronize(); the gradients were "
                              "allreduced again.")
            self.synchronize()
        self._synchronized = False
        return super().step(closure)


def DistributedOptimizer(optimizer, named_parameters=None, compression=Compression.none,
                         backward_passes_per_step=1, op=Average, gradient_predivide_factor=1.0,
                         num_groups=0, groups=None, sparse_as_dense=False,
                         process_set=global_process_set):
    """Wraps `optimizer` so that step() uses gradients averaged over all ranks (of
    `process_set`: only its members may call step(), as in Horovod).

    Returns an instance of a subclass of the optimizer's own class (as Horovod does),
    so isinstance checks and the optimizer's options keep working."""
    if gradient_predivide_factor != 1.0 and op != Average:
        raise KoloValueError("gradient_predivide_factor is supported only with op=Average")
    if backward_passes_per_step < 1:
        raise KoloValueError("backward_passes_per_step must be at least 1")
    if num_groups or groups:
        warnings.warn("kolo ignores num_groups/groups: kolo's fusion buckets gradients itself")
    _core.check_op(op)
    if op == Adasum and _core.size() > 1:
        # Horovod's delta optimizer: see adasum_optimizer.py.
        _check_adasum(op, "DistributedOptimizer(op=Adasum)",
                      0 if process_set is global_process_set else 1)
        return wrap(optimizer, _DistributedAdasumOptimizer, named_parameters, compression,
                    backward_passes_per_step)
    return wrap(optimizer, _DistributedOptimizer, named_parameters, compression,
                backward_passes_per_step, op, gradient_predivide_factor, groups, sparse_as_dense,
                process_set)
