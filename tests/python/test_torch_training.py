"""DistributedOptimizer and state broadcast: what a Horovod training script relies on."""

import pytest

torch = pytest.importorskip(
    "torch", reason="python3-torch is not installed (tools/setup-deps.sh installs it)")

import kolo.torch as hvd  # noqa: E402
from conftest import needs  # noqa: E402
from fashion_lenet import init_weights, lenet, shard, synthetic_fashion  # noqa: E402

torch.set_num_threads(1)


@pytest.fixture
def world():
    return hvd.rank(), hvd.size()


def linear_model(seed):
    torch.manual_seed(seed)
    return torch.nn.Linear(3, 2, bias=True)


def test_gradients_are_averaged_with_hooks(world):
    r, n = world
    model = linear_model(0)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=1.0),
                                   named_parameters=model.named_parameters())
    assert isinstance(opt, torch.optim.SGD)
    before = [p.detach().clone() for p in model.parameters()]
    # d(sum(W x + b))/dW = x broadcast to every output row; x = (r+1) * ones.
    model(torch.full((1, 3), float(r + 1))).sum().backward()
    assert len(opt._handles) == 2  # each gradient's allreduce started during backward
    opt.step()
    mean = (n + 1) / 2
    assert torch.allclose(model.weight, before[0] - mean)
    assert torch.allclose(model.bias, before[1] - 1.0)


def test_backward_passes_per_step_2(world):
    r, n = world
    model = linear_model(1)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.5),
                                   named_parameters=model.named_parameters(),
                                   backward_passes_per_step=2)
    w0 = model.weight.detach().clone()
    model(torch.full((1, 3), float(r + 1))).sum().backward()
    assert all(h is None for h, _ in opt._handles.values())  # first pass: accumulate only
    model(torch.full((1, 3), float(2 * (r + 1)))).sum().backward()
    assert all(h is not None for h, _ in opt._handles.values())
    opt.step()
    # Local gradient: (r+1) + 2(r+1) = 3(r+1); averaged over ranks: 3(n+1)/2.
    assert torch.allclose(model.weight, w0 - 0.5 * 3 * (n + 1) / 2)
    opt.zero_grad()
    model(torch.ones(1, 3)).sum().backward()
    model(torch.ones(1, 3)).sum().backward()
    with pytest.raises(AssertionError, match="backward_passes_per_step"):
        model(torch.ones(1, 3)).sum().backward()
    opt.synchronize()


def test_sum_op_predivide_and_fp16_compression(world):
    r, n = world
    model = linear_model(2)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=1.0),
                                   named_parameters=model.named_parameters(),
                                   compression=hvd.Compression.fp16,
                                   gradient_predivide_factor=2.0)
    w0 = model.weight.detach().clone()
    model(torch.full((1, 3), 0.25 * (r + 1))).sum().backward()
    opt.step()
    assert model.weight.grad.dtype == torch.float32
    assert torch.equal(model.weight, w0 - 0.25 * (n + 1) / 2)  # exact in fp16
    t = torch.full((5,), 1.0 / 3.0 + r, dtype=torch.float32)
    got = hvd.allreduce(t, op=hvd.Sum, compression=hvd.Compression.fp16)
    want = sum(torch.tensor(1.0 / 3.0 + q).half().float() for q in range(n))
    assert got.dtype == torch.float32 and torch.allclose(got, want.expand(5), rtol=1e-3)
    summed = linear_model(3)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(summed.parameters(), lr=1.0), op=hvd.Sum)
    b0 = summed.bias.detach().clone()
    summed(torch.ones(1, 3)).sum().backward()
    opt.step()
    assert torch.equal(summed.bias, b0 - n)


def test_unused_parameters_are_reduced_with_zeros(world):
    r, n = world
    torch.manual_seed(4)
    a, b = torch.nn.Linear(2, 1), torch.nn.Linear(2, 1)
    params = list(a.named_parameters(prefix="a")) + list(b.named_parameters(prefix="b"))
    opt = hvd.DistributedOptimizer(torch.optim.SGD([p for _, p in params], lr=1.0),
                                   named_parameters=params)
    b0 = b.bias.detach().clone()
    # Only rank 0 uses b: its gradient (1) is averaged with the others' zeros.
    loss = a(torch.ones(1, 2)).sum() + (b(torch.ones(1, 2)).sum() if r == 0 else 0)
    loss.backward()
    opt.step()
    assert torch.allclose(b.bias, b0 - 1.0 / n)


def test_named_parameters_are_checked():
    model = linear_model(5)
    sgd = torch.optim.SGD(model.parameters(), lr=1.0)
    with pytest.raises(ValueError, match="unique"):
        hvd.DistributedOptimizer(sgd, named_parameters=[("w", model.weight), ("w", model.bias)])
    with pytest.raises(ValueError, match="not named"):
        hvd.DistributedOptimizer(sgd, named_parameters=[("w", model.weight)])


@needs("kolo_broadcast_async")
def test_broadcast_parameters_and_optimizer_state(world):
    r, n = world
    model = linear_model(10 + r)  # different on every rank
    opt = torch.optim.Adam(model.parameters(), lr=1e-3 * (r + 1))
    for _ in range(r + 1):  # different state (step counts, moments) on every rank
        opt.zero_grad()
        model(torch.full((2, 3), float(r))).pow(2).sum().backward()
        opt.step()
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    ref = linear_model(10)
    ref_opt = torch.optim.Adam(ref.parameters(), lr=1e-3)
    ref_opt.zero_grad()
    ref(torch.full((2, 3), 0.0)).pow(2).sum().backward()
    ref_opt.step()
    for p, q in zip(model.parameters(), ref.parameters()):
        assert torch.equal(p, q)
    assert opt.param_groups[0]["lr"] == 1e-3
    for p, q in zip(model.parameters(), ref.parameters()):
        s, t = opt.state[p], ref_opt.state[q]
        assert float(s["step"]) == 1.0
        assert torch.equal(s["exp_avg"], t["exp_avg"])
        assert torch.equal(s["exp_avg_sq"], t["exp_avg_sq"])
    named = list(model.named_parameters())
    with torch.no_grad():
        for _, p in named:
            p.add_(r)
    hvd.broadcast_parameters(named, root_rank=n - 1)
    for (_, p), q in zip(named, ref.parameters()):
        assert torch.equal(p, q + (n - 1))


def test_lenet_two_ranks_match_one_process_on_the_combined_batch(world):
    """k steps of data-parallel SGD on shards of a global batch == k steps of plain
    SGD on the whole batch in one process (within float tolerance)."""
    r, n = world
    steps, batch = 3, 12 * n
    images, labels = synthetic_fashion(steps * batch, seed=7)
    loss_fn = torch.nn.CrossEntropyLoss()

    def trained(distributed):
        torch.manual_seed(0)
        model = lenet()
        init_weights(model)
        opt = torch.optim.SGD(model.parameters(), lr=0.9)
        if distributed:
            opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters())
        for s in range(steps):
            x, y = images[s * batch:(s + 1) * batch], labels[s * batch:(s + 1) * batch]
            if distributed:
                x, y = shard(x, r, n), shard(y, r, n)
            opt.zero_grad()
            loss_fn(model(x), y).backward()
            opt.step()
        return model

    dist, single = trained(True), trained(False)
    for (name, p), q in zip(dist.named_parameters(), single.parameters()):
        assert torch.allclose(p, q, rtol=1e-5, atol=1e-6), name
    flat = torch.cat([p.detach().reshape(-1) for p in dist.parameters()])
    assert torch.equal(hvd.allreduce(flat, op=hvd.Max), hvd.allreduce(flat, op=hvd.Min))
