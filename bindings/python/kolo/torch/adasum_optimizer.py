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
from ._async_ops import allreduce_async_, synchronize
from ._optimizer_base import _HookedOptimizer


class _DistributedAdasumOptimizer(_HookedOptimizer):
    def __init__(self, params, named_parameters, compression, backward_passes_per_step=1):
        super().__init__(params)
        self._starting_models = {p: torch.zeros_like(p, requires_grad=False)
                                 for group in self.param_groups for p in group["params"]}
        # Every parameter has a gradient to step on, even one unused in a step's graph
        # (as in Horovod).
        self._init_hooks(named_parameters, compression, backward_passes_per_step,
                         zero_grads_first=True)

    def _allreduce_grad_async(self, p):
        """The local step for p alone, then the Adasum allreduce of its delta."""
        start = self._starting_models[p]
        stashed = [group["params"] for group in self.param_groups]
        for group in self.param_groups:
            group["params"] = [p] if any(p is q for q in group["params"]) else []
        try:
            start.data.copy_(p.data)
            self._local_step()
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
        for p in self._missing_in_order():
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
