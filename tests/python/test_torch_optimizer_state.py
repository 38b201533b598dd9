"""broadcast_optimizer_state with parameters that have no gradient (issue 14 item 9),
as Horovod documents and tests it: a fresh optimizer gets its initial state (a zero
gradient and one local step for each parameter that requires a gradient), a
parameter with requires_grad=False keeps grad None and gets no state, and every
rank ends with root_rank's state and options."""

import io

import pytest
import torch

import kolo.torch as hvd


class NoGrad(torch.nn.Module):
    """Horovod's test model: an int index parameter that cannot require a gradient."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Parameter(torch.tensor([1, 3], dtype=torch.int32), requires_grad=False)
        self.b = torch.nn.Parameter(torch.arange(4, dtype=torch.float32) + hvd.rank())

    def forward(self, x):
        return torch.index_select(self.b, 0, self.a.long()) * x


class Partly(torch.nn.Module):
    """One used layer, one frozen, one never used in forward."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(hvd.rank())
        self.used = torch.nn.Linear(3, 2)
        self.frozen = torch.nn.Linear(3, 3)
        self.frozen.requires_grad_(False)
        self.unused = torch.nn.Linear(2, 2)

    def forward(self, x):
        return self.used(self.frozen(x))


def state_bytes(optimizer):
    buf = io.BytesIO()
    torch.save(optimizer.state_dict(), buf)
    return buf.getvalue()


def assert_same_as_root(optimizer, root):
    states = hvd.allgather_object(state_bytes(optimizer))
    assert all(s == states[root] for s in states)


@pytest.mark.parametrize("distributed", [True, False], ids=["distributed", "plain"])
def test_fresh_optimizer_with_a_parameter_that_cannot_have_a_gradient(world, distributed):
    model = NoGrad()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.001, weight_decay=1e-6, momentum=0.9,
                                nesterov=True)
    if distributed:
        optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    before = model.b.detach().clone()
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
    assert optimizer.param_groups[0]["params"][0].grad is None
    grad = optimizer.param_groups[0]["params"][1].grad
    assert torch.equal(grad, torch.zeros(4))
    assert torch.equal(hvd.broadcast(grad, root_rank=0), grad)
    assert model.a not in optimizer.state and "momentum_buffer" in optimizer.state[model.b]
    assert torch.equal(model.b, before)  # the initialising step does not move parameters
    assert_same_as_root(optimizer, 0)


@pytest.mark.parametrize("make", [
    lambda ps: torch.optim.SGD(ps, lr=0.1 + hvd.rank(), momentum=0.9),
    lambda ps: torch.optim.SGD(ps, lr=0.1 + hvd.rank()),
    lambda ps: torch.optim.Adam(ps, lr=0.1 + hvd.rank()),
    lambda ps: torch.optim.RMSprop(ps, lr=0.1 + hvd.rank()),
], ids=["sgd_momentum", "sgd", "adam", "rmsprop"])
def test_frozen_and_unused_parameters_before_and_after_training(world, make):
    r, n = world
    for trained in (False, True):
        model = Partly()
        optimizer = hvd.DistributedOptimizer(make(model.parameters()),
                                             named_parameters=model.named_parameters())
        if trained:
            for step in range(2):
                optimizer.zero_grad()
                model(torch.full((2, 3), float(r + step))).sum().backward()
                optimizer.step()
        root = n - 1
        hvd.broadcast_optimizer_state(optimizer, root_rank=root)
        assert optimizer.param_groups[0]["lr"] == 0.1 + root
        assert model.frozen.weight.grad is None and model.frozen.weight not in optimizer.state
        for p in (model.used.weight, model.unused.weight):
            assert p in optimizer.state, "no state for a parameter that requires a gradient"
        assert_same_as_root(optimizer, root)
        # Training goes on from there on every rank.
        optimizer.zero_grad()
        model(torch.ones(1, 3)).sum().backward()
        optimizer.step()


@pytest.mark.parametrize("adasum", [False, True], ids=["average", "adasum"])
def test_load_state_dict_forgets_a_step_in_progress(world, adasum):
    """As Horovod's: load_state_dict mid-step (kolo.torch.elastic's restore after a
    broken world) drops the step's pending reductions and restarts the count of
    backward passes, so the next step runs whole instead of raising "computed more
    than backward_passes_per_step times"."""
    r, n = world
    if adasum and n & (n - 1):
        pytest.skip("Adasum needs a power-of-2 number of ranks")
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    optimizer = hvd.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=0.1), named_parameters=model.named_parameters(),
        backward_passes_per_step=2, op=hvd.Adasum if adasum else hvd.Average)
    saved = optimizer.state_dict()
    model(torch.ones(1, 3)).sum().backward()  # one of the step's two passes, then a restore
    optimizer.load_state_dict(saved)
    assert all(d == 2 for d in optimizer._allreduce_delay.values())
    optimizer.zero_grad()
    for _ in range(2):
        model(torch.full((1, 3), float(r + 1))).sum().backward()
    optimizer.step()
    weights = hvd.allgather_object(model.weight.detach().clone())
    assert all(torch.equal(w, weights[0]) for w in weights)
