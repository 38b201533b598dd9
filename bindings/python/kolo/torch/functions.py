"""Model and optimizer state across ranks, and arbitrary picklable objects:
horovod.torch's broadcast_parameters, broadcast_optimizer_state, broadcast_object
and allgather_object."""

import pickle

import torch

from .. import _core
from ..exceptions import KoloValueError
from .mpi_ops import (allgather, broadcast_, broadcast_async_, global_process_set,
                      synchronize)


def broadcast_parameters(params, root_rank, process_set=global_process_set):
    """Overwrites every tensor of `params` (a state_dict, or a list of (name, tensor)
    pairs such as model.named_parameters()) with root_rank's (a global rank), in
    place, on the ranks of `process_set`. All broadcasts are started before any is
    waited for."""
    if isinstance(params, dict):
        params = sorted(params.items())
    elif isinstance(params, (list, tuple)) or hasattr(params, "__iter__"):
        params = [p if isinstance(p, tuple) else (None, p) for p in params]
    else:
        raise KoloValueError("invalid params of type %s" % type(params).__name__)
    handles = []
    for name, p in params:
        if p is None:
            continue
        if not isinstance(p, torch.Tensor):
            raise KoloValueError("broadcast_parameters: %r is a %s, not a tensor" % (
                name, type(p).__name__))
        handles.append(broadcast_async_(p, root_rank, name, process_set))
    for handle in handles:
        synchronize(handle)


def broadcast_optimizer_state(optimizer, root_rank, process_set=global_process_set):
    """Leaves every rank's (of `process_set`) optimizer with root_rank's state and
    options (learning rate, momentum buffers, step counts, ...): root_rank's
    state_dict is broadcast as an object and loaded on the other ranks.

    As in Horovod, an optimizer without state yet (none of its parameters stepped) is
    first given its initial state: each parameter that requires a gradient and has no
    state gets a zero gradient (left in p.grad afterwards) and the wrapped
    optimizer's own step() runs once, locally. Parameters with requires_grad=False
    keep p.grad None and get no state. Unlike Horovod, that step does not move the
    parameters (with weight decay it would): they are restored after it."""
    if isinstance(optimizer, torch.optim.LBFGS):
        raise KoloValueError("cannot broadcast torch.optim.LBFGS state")
    if not optimizer.state_dict()["state"]:
        _initialize_state(optimizer)
    state = optimizer.state_dict() if _core.rank() == root_rank else None
    state = broadcast_object(state, root_rank, name="broadcast_optimizer_state",
                             process_set=process_set)
    if _core.rank() != root_rank:
        optimizer.load_state_dict(state)


def _initialize_state(optimizer):
    params = [p for group in optimizer.param_groups for p in group["params"]
              if p.requires_grad and p not in optimizer.state]
    if not params:
        return
    saved = [p.detach().clone() for p in params]
    for p in params:
        p.grad = torch.zeros_like(p)
        if isinstance(optimizer, torch.optim.SparseAdam):
            p.grad = p.grad.to_sparse()
    # A DistributedOptimizer's step() would allreduce every gradient, which needs
    # every rank; the wrapped optimizer's step is local.
    if getattr(optimizer, "_kolo_distributed", False):
        optimizer._local_step()
    else:
        optimizer.step()
    with torch.no_grad():
        for p, value in zip(params, saved):
            p.copy_(value)


def broadcast_object(obj, root_rank=0, name=None, process_set=global_process_set):
    """root_rank's (a global rank) `obj` (any picklable object) on every rank of
    `process_set`."""
    name = name or type(obj).__name__
    if _core.rank() == root_rank:
        payload = torch.frombuffer(bytearray(pickle.dumps(obj)), dtype=torch.uint8)
        size = torch.tensor([payload.numel()], dtype=torch.int64)
        broadcast_(size, root_rank, name + ".sz", process_set)
    else:
        size = torch.zeros(1, dtype=torch.int64)
        broadcast_(size, root_rank, name + ".sz", process_set)
        payload = torch.empty(int(size[0]), dtype=torch.uint8)
    broadcast_(payload, root_rank, name + ".t", process_set)
    if _core.rank() == root_rank:
        return obj
    return pickle.loads(payload.numpy().tobytes())


def allgather_object(obj, name=None, process_set=global_process_set):
    """The list of every rank's (of `process_set`) `obj` (any picklable object), in
    rank order."""
    name = name or type(obj).__name__
    payload = torch.frombuffer(bytearray(pickle.dumps(obj)), dtype=torch.uint8)
    sizes = allgather(torch.tensor([payload.numel()], dtype=torch.int64), name=name + ".sz",
                      process_set=process_set)
    gathered = allgather(payload, name=name + ".t", process_set=process_set).numpy()
    out, offset = [], 0
    for n in sizes.tolist():
        out.append(pickle.loads(gathered[offset:offset + n].tobytes()))
        offset += n
    return out
