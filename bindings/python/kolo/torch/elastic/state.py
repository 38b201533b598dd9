"""TorchState: the state of a PyTorch elastic job (horovod/torch/elastic/state.py):
models, optimizers and ElasticSamplers given as keyword arguments are saved,
restored and synced through their state_dict (deep copies in host memory,
broadcast from rank 0); any other argument is a plain attribute (ObjectState).

    state = kolo.torch.elastic.TorchState(model, optimizer, sampler=sampler, epoch=0)

Assigning a new model or optimizer to a tracked attribute saves it at once, as
Horovod does. The handler table (get/set_handler_registry) is Horovod's hook for
more types.
"""

import copy

import torch

from ..functions import broadcast_object, broadcast_optimizer_state, broadcast_parameters
from ... import _core
from ...elastic._state import ObjectState
from .sampler import ElasticSampler


class TorchState(ObjectState):
    """State of models, optimizers, samplers and plain attributes."""

    def __init__(self, model=None, optimizer=None, **kwargs):
        kwargs.update(dict(model=model, optimizer=optimizer))
        self._handlers, kwargs = _get_handlers(kwargs)
        for name, handler in self._handlers.items():
            setattr(self, name, handler.value)
        super().__init__(bcast_object=broadcast_object, get_rank=_core.rank, **kwargs)

    def save(self):
        for handler in self._handlers.values():
            handler.save()
        super().save()

    def restore(self):
        for handler in self._handlers.values():
            handler.restore()
        super().restore()

    def sync(self):
        for handler in self._handlers.values():
            handler.sync()
        super().sync()

    def reset(self):
        """After re-forming: samplers split what is left of the epoch over the new
        ranks at once, also when the sync is skipped (hosts only removed), where
        Horovod's kept the old split until the next sync."""
        for handler in self._handlers.values():
            if isinstance(handler, SamplerStateHandler):
                handler.value.reset()

    def __setattr__(self, name, value):
        if hasattr(self, name) and name in self._handlers:
            self._handlers[name].set_value(value)
        super().__setattr__(name, value)


class StateHandler:
    """How one kind of object is saved, restored and synced."""

    def __init__(self, value):
        self.value = value
        self.save()

    def save(self):
        self._saved = copy.deepcopy(self.value.state_dict())

    def restore(self):
        self.value.load_state_dict(self._saved)

    def sync(self):
        raise NotImplementedError()

    def set_value(self, value):
        self.value = value
        self.save()


class ModelStateHandler(StateHandler):
    def sync(self):
        broadcast_parameters(self.value.state_dict(), root_rank=0)


class OptimizerStateHandler(StateHandler):
    def restore(self):
        super().restore()
        _forget_pending(self.value)

    def sync(self):
        broadcast_optimizer_state(self.value, root_rank=0)


def _forget_pending(optimizer):
    """Drops a DistributedOptimizer's allreduces that were in flight when the world
    broke (their handles failed with it) and restarts its count of backward passes,
    as Horovod's DistributedOptimizer.load_state_dict does; kolo's does not yet, and
    without this the next backward pass trips its "computed more than
    backward_passes_per_step times" check. Nothing for another optimizer."""
    if not getattr(optimizer, "_kolo_distributed", False):
        return
    optimizer._handles.clear()
    for p in optimizer._allreduce_delay:
        optimizer._allreduce_delay[p] = optimizer.backward_passes_per_step
    if hasattr(optimizer, "_synchronized"):
        optimizer._synchronized = False
        optimizer._should_synchronize = True


class SamplerStateHandler(StateHandler):
    def sync(self):
        self.value.load_state_dict(broadcast_object(self.value.state_dict()))


_handler_registry = [
    (torch.nn.Module, ModelStateHandler),
    (torch.optim.Optimizer, OptimizerStateHandler),
    (ElasticSampler, SamplerStateHandler),
]


def get_handler_registry():
    return _handler_registry


def set_handler_registry(registry):
    global _handler_registry
    _handler_registry = registry


def _get_handlers(kwargs):
    handlers, rest = {}, {}
    for key, value in kwargs.items():
        handler = next((cls(value) for kind, cls in _handler_registry if isinstance(value, kind)),
                       None)
        if handler is None:
            rest[key] = value
        else:
            handlers[key] = handler
    return handlers, rest
