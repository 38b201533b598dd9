"""DistributedOptimizer(op=Adasum): Horovod's delta optimizer.

With op=Adasum, Horovod does not combine gradients: each rank runs the wrapped
optimizer locally and Adasum combines the *updates* (deltas). kolo does the same:

- When backward has produced p's gradient for the last of backward_passes_per_step
  passes (a hook on p's gradient accumulator, as for the averaging optimizer), the
  wrapped optimizer's step() runs for p alone (its param groups are narrowed to p
  for the call, so momentum and the like stay per parameter), from a saved copy
  ``start`` of p: p now holds ``start - lr * f(grad)``. Then ``delta = p - start``
  (in p's own storage) starts its allreduce with op=Adasum, under p's name.
- step() waits for every delta, and sets ``start += adasum(delta)`` and
  ``p = start``. A parameter whose hook never fired is stepped and reduced there.
- synchronize() does nothing (as in Horovod) and skip_synchronize() raises.

``compression`` compresses the delta for the wire. As in Horovod, the wrapped
optimizer's step() therefore runs inside backward, one parameter at a time.
"""

import contextlib

import torch

from .._core import Adasum
from .mpi_ops import allreduce_async_, synchronize
from .optimizer import _DistributedOptimizer


class _DistributedAdasumOptimizer(torch.optim.Optimizer):
    def __init__(self, params, named_parameters, compression, backward_passes_per_step=1):
        super(self.__class__, self).__init__(params)
        self._compression = compression
        self._parameter_names = self._names(named_parameters)
        self.backward_passes_per_step = backward_passes_per_step
        self._allreduce_delay = {p: backward_passes_per_step
                                 for group in self.param_groups for p in group["params"]}
        self._handles = {}
        self._grad_accs = []
        self._requires_update = set()
        self._starting_models = {p: torch.zeros_like(p, requires_grad=False)
                                 for group in self.param_groups for p in group["params"]}
        self._register_hooks()

    # The same as the averaging optimizer's: naming, the hook that counts backward
    # passes and calls this class's _allreduce_grad_async on the last one, and
    # zero_grad's refusal while gradients are still being reduced.
    _names = _DistributedOptimizer.__dict__["_names"]
    set_backward_passes_per_step = _DistributedOptimizer.__dict__["set_backward_passes_per_step"]
    _make_hook = _DistributedOptimizer.__dict__["_make_hook"]
    zero_grad = _DistributedOptimizer.__dict__["zero_grad"]

    def _register_hooks(self):
        for group in self.param_groups:
            for p in group["params"]:
                if p.requires_grad:
                    # Every parameter has a gradient to step on, even one unused in a
                    # step's graph (as in Horovod).
                    p.grad = torch.zeros_like(p)
                    self._requires_update.add(p)
                    grad_acc = p.expand_as(p).grad_fn.next_functions[0][0]
                    grad_acc.register_hook(self._make_hook(p))
                    self._grad_accs.append(grad_acc)

    def _allreduce_grad_async(self, p):
        """The local step for p alone, then the Adasum allreduce of its delta."""
        start = self._starting_models[p]
        stashed = [group["params"] for group in self.param_groups]
        for group in self.param_groups:
            group["params"] = [p] if any(p is q for q in group["params"]) else []
        try:
            start.data.copy_(p.data)
            super(self.__class__, self).step()
        finally:
            for group, params in zip(self.param_groups, stashed):
                group["params"] = params
        p.data.sub_(start)  # p now holds the delta
        compressed, ctx = self._compression.compress(p.data)
        handle = allreduce_async_(compressed, name=self._parameter_names.get(p), op=Adasum)
        return handle, ctx

    def synchronize(self):
        """Nothing to do: step() waits for the deltas (as in Horovod)."""

    @contextlib.contextmanager
    def skip_synchronize(self):
        raise AssertionError("Skipping synchronization is not supported when using Adasum "
                             "optimizer.")
        yield  # pragma: no cover

    def step(self, closure=None):
        loss = None
        if closure is not None:
            loss = closure()
        missing = sorted(self._requires_update - set(self._handles),
                         key=lambda q: self._parameter_names.get(q, ""))
        for p in missing:
            self._handles[p] = self._allreduce_grad_async(p)
        try:
            for p, (handle, ctx) in list(self._handles.items()):
                if handle is None:  # step() before backward_passes_per_step passes
                    handle, ctx = self._allreduce_grad_async(p)
                delta = self._compression.decompress(synchronize(handle), ctx)
                start = self._starting_models[p]
                start.data.add_(delta.data)
                p.data.copy_(start)
                self._allreduce_delay[p] = self.backward_passes_per_step
        finally:
            self._handles.clear()
        return loss

