"""What the averaging optimizer (optimizer.py) and Horovod's Adasum delta optimizer
(adasum_optimizer.py) share: parameter names, the hook on each parameter's
gradient accumulator that counts backward passes and starts that parameter's
reduction on the last one, zero_grad's refusal while reductions are in flight,
and how a wrapped optimizer becomes a distributed one.

``wrap(optimizer, mixin, *args)`` returns an instance of a new class named after
the optimizer's own, deriving from ``mixin`` (a subclass of _HookedOptimizer) and
from the optimizer's class (as Horovod's DistributedOptimizer does), so isinstance
checks and the optimizer's options keep working. In the mixins, ``super()`` is
the wrapped optimizer's class: ``super().step()`` is the local step.

Each mixin implements ``_allreduce_grad_async(p) -> (handle, ctx)``.
"""

import torch

from ..exceptions import KoloValueError


def wrap(optimizer, mixin, *args):
    cls = type(optimizer.__class__.__name__, (mixin, optimizer.__class__), {})
    return cls(optimizer.param_groups, *args)


class _HookedOptimizer(torch.optim.Optimizer):
    _kolo_distributed = True  # broadcast_optimizer_state runs _local_step()

    def _init_hooks(self, named_parameters, compression, backward_passes_per_step,
                    zero_grads_first=False):
        """The state both optimizers keep; registers the gradient hooks. With
        zero_grads_first, every parameter starts with a zero gradient (Adasum steps
        on every parameter, used or not)."""
        self._compression = compression
        self._parameter_names = self._names(named_parameters)
        self.backward_passes_per_step = backward_passes_per_step
        self._allreduce_delay = {p: backward_passes_per_step
                                 for group in self.param_groups for p in group["params"]}
        self._handles = {}
        self._grad_accs = []
        self._requires_update = set()
        for group in self.param_groups:
            for p in group["params"]:
                if p.requires_grad:
                    if zero_grads_first:
                        p.grad = torch.zeros_like(p)
                    self._requires_update.add(p)
                    # The gradient accumulator of p: its hook runs once p.grad is final
                    # for this backward pass.
                    grad_acc = p.expand_as(p).grad_fn.next_functions[0][0]
                    grad_acc.register_hook(self._make_hook(p))
                    self._grad_accs.append(grad_acc)

    def _names(self, named_parameters):
        if named_parameters is not None:
            named_parameters = list(named_parameters)
        else:
            named_parameters = [("noname.%d.%d" % (i, j), p)
                                for i, group in enumerate(self.param_groups)
                                for j, p in enumerate(group["params"])]
        if any(not isinstance(item, tuple) or len(item) != 2 for item in named_parameters):
            raise KoloValueError("named_parameters should be a sequence of (name, parameter) "
                                 "tuples, usually produced by model.named_parameters()")
        seen, dups = set(), set()
        for name, _ in named_parameters:
            (dups if name in seen else seen).add(name)
        if dups:
            raise KoloValueError("parameter names in named_parameters must be unique; "
                                 "duplicates: %s" % ", ".join(sorted(dups)))
        named_ids = {id(p) for _, p in named_parameters}
        unnamed = [id(p) for g in self.param_groups for p in g["params"] if id(p) not in named_ids]
        if unnamed:
            raise KoloValueError("named_parameters was given, but %d optimizer parameters are "
                                 "not named in it" % len(unnamed))
        return {p: name for name, p in named_parameters}

    def set_backward_passes_per_step(self, passes):
        self.backward_passes_per_step = passes
        for p in self._allreduce_delay:
            self._allreduce_delay[p] = passes

    def _make_hook(self, p):
        def hook(*ignore):
            if p in self._handles and self._handles[p][0] is not None:
                if self._allreduce_delay[p] <= 0:
                    raise AssertionError(
                        "Gradients were computed more than backward_passes_per_step times "
                        "before call to step(). Increase backward_passes_per_step to "
                        "accumulate gradients locally.")
            assert not p.grad.requires_grad
            assert self._allreduce_delay[p] > 0
            handle, ctx = None, None
            self._allreduce_delay[p] -= 1
            if self._allreduce_delay[p] == 0:
                handle, ctx = self._allreduce_grad_async(p)
            self._handles[p] = (handle, ctx)
        return hook

    def _missing_in_order(self):
        """Parameters whose hook has not fired, in name order (the same on every rank)."""
        return sorted(self._requires_update - set(self._handles),
                      key=lambda q: self._parameter_names.get(q, ""))

    def _local_step(self, closure=None):
        """The wrapped optimizer's own step, on this rank alone."""
        return super().step(closure)

    def zero_grad(self, *args, **kwargs):
        if self._handles:
            raise AssertionError(
                "optimizer.zero_grad() was called after loss.backward() but before "
                "optimizer.step() or optimizer.synchronize(): the gradients are still being "
                "reduced.")
        return super().zero_grad(*args, **kwargs)
