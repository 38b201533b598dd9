"""op=Adasum in kolo.torch (and the NumPy API), against a NumPy reference of Horovod's
formula: per tensor,

    adasum(a, b) = (1 - a.b / (2 |a|^2)) a + (1 - a.b / (2 |b|^2)) b

(a coefficient is 1 where its |.|^2 < 1e-8), ranks combined as a binary tree (rank
2i with 2i+1, then those pairs, ...). At 2 ranks the inputs are small integers, so
every sum is exact and results compare with ==; a deeper tree gets a tolerance.
On a world whose size is not a power of two (np3), Adasum is refused as Horovod
refuses it: NotImplementedError from kolo.torch, UnsupportedError from the core.
"""

import numpy as np
import pytest
import torch

import kolo
import kolo.torch as hvd

POWER_OF_TWO = kolo.size() & (kolo.size() - 1) == 0


def adasum_pair(a, b):
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    dot, aa, bb = float(np.dot(a, b)), float(np.dot(a, a)), float(np.dot(b, b))
    ca = 1.0 - dot / aa * 0.5 if aa >= 1e-8 else 1.0
    cb = 1.0 - dot / bb * 0.5 if bb >= 1e-8 else 1.0
    return ca * a + cb * b


def adasum_reference(per_rank):
    level = [np.asarray(v, np.float64).ravel() for v in per_rank]
    while len(level) > 1:
        level = [adasum_pair(level[i], level[i + 1]) for i in range(0, len(level), 2)]
    return level[0]


def value(t, rank, shape):
    """Rank `rank`'s tensor t: small integers; tensor 2 is zero on odd ranks."""
    n = int(np.prod(shape))
    if t == 2 and rank % 2 == 1:
        return np.zeros(shape)
    i = np.arange(n)
    return ((i * 5 + rank * 3 + t * 7) % 11 - 5).astype(np.float64).reshape(shape)


SHAPES = [(7,), (3, 4), (33,), (0,), (10, 10)]


def expected(t, shape, n, scale=1.0):
    return adasum_reference([scale * value(t, r, shape) for r in range(n)]).reshape(shape)


def check(got, want):
    got = np.asarray(got, np.float64)
    if kolo.size() <= 2:
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.skipif(not POWER_OF_TWO, reason="Adasum needs a power-of-two world")
def test_allreduce_adasum_matches_the_reference(world):
    r, n = world
    for t, shape in enumerate(SHAPES):
        x = torch.tensor(value(t, r, shape))
        out = hvd.allreduce(x, op=hvd.Adasum, name="adasum.t%d" % t)
        check(out.numpy(), expected(t, shape, n))
        assert torch.equal(x, torch.tensor(value(t, r, shape)))  # the input is untouched


@pytest.mark.skipif(not POWER_OF_TWO, reason="Adasum needs a power-of-two world")
def test_fused_grouped_and_in_place_give_the_same_values(world):
    r, n = world
    # Submitted together: the coordinator fuses them into buckets.
    handles = [hvd.allreduce_async(torch.tensor(value(t, r, s)), op=hvd.Adasum,
                                   name="adasum.fused%d" % t) for t, s in enumerate(SHAPES)]
    fused = [hvd.synchronize(h) for h in handles]
    grouped = hvd.grouped_allreduce([torch.tensor(value(t, r, s)) for t, s in enumerate(SHAPES)],
                                    op=hvd.Adasum, name="adasum.group")
    in_place = [torch.tensor(value(t, r, s)) for t, s in enumerate(SHAPES)]
    for t, x in enumerate(in_place):
        hvd.allreduce_(x, op=hvd.Adasum, name="adasum.inplace%d" % t)
    for t, shape in enumerate(SHAPES):
        want = expected(t, shape, n)
        check(fused[t].numpy(), want)
        check(grouped[t].numpy(), want)
        check(in_place[t].numpy(), want)


@pytest.mark.skipif(not POWER_OF_TWO, reason="Adasum needs a power-of-two world")
def test_scale_factors_and_dtypes(world):
    r, n = world
    x = torch.tensor(value(0, r, (33,)))
    out = hvd.allreduce(x, op=hvd.Adasum, prescale_factor=2.0, postscale_factor=0.25,
                        name="adasum.scaled")
    check(out.numpy(), expected(0, (33,), n, scale=2.0) * 0.25)
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        out = hvd.allreduce(x.to(dtype), op=hvd.Adasum, name="adasum.%s" % dtype)
        assert out.dtype == dtype
        want = torch.tensor(expected(0, (33,), n)).to(dtype)
        if n <= 2:
            assert torch.equal(out, want), (out, want)
        else:
            assert torch.allclose(out.double(), want.double(), rtol=1e-2)
    # A compressed allreduce travels as float16.
    out = hvd.allreduce(x.float(), op=hvd.Adasum, compression=hvd.Compression.fp16,
                        name="adasum.fp16")
    assert out.dtype == torch.float32
    if n <= 2:
        assert torch.equal(out, torch.tensor(expected(0, (33,), n)).half().float())


@pytest.mark.skipif(not POWER_OF_TWO, reason="Adasum needs a power-of-two world")
def test_what_adasum_cannot_do_is_refused_naming_why(world):
    with pytest.raises(hvd.UnsupportedError, match="int32"):
        hvd.allreduce(torch.ones(3, dtype=torch.int32), op=hvd.Adasum, name="adasum.int")
    with pytest.raises(RuntimeError):  # as Horovod's (test_horovod_reducescatter_adasum)
        hvd.reducescatter(torch.ones(4), op=hvd.Adasum)


@pytest.mark.skipif(POWER_OF_TWO, reason="this world is a power of two")
def test_non_power_of_two_world_is_refused_as_horovod_refuses_it(world):
    r, n = world
    for call in (lambda: hvd.allreduce(torch.ones(3), op=hvd.Adasum),
                 lambda: hvd.allreduce_async_(torch.ones(3), op=hvd.Adasum),
                 lambda: hvd.grouped_allreduce([torch.ones(3)], op=hvd.Adasum)):
        with pytest.raises(NotImplementedError, match="non-power of 2"):
            call()
    model = torch.nn.Linear(2, 1)
    with pytest.raises(NotImplementedError, match="non-power of 2"):
        hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                 named_parameters=model.named_parameters(), op=hvd.Adasum)
    # The core refuses it too (the NumPy API has no check of its own), on every rank.
    with pytest.raises(kolo.UnsupportedError, match="power-of-two"):
        kolo.allreduce(np.ones(3), op=kolo.Adasum, name="adasum.numpy")


@pytest.mark.skipif(not POWER_OF_TWO, reason="Adasum needs a power-of-two world")
def test_numpy_api(world):
    r, n = world
    out = kolo.allreduce(value(0, r, (3, 4)), op=kolo.Adasum, name="adasum.np")
    check(out, expected(0, (3, 4), n))


@pytest.mark.skipif(not POWER_OF_TWO, reason="Adasum needs a power-of-two world")
def test_a_joined_rank_contributes_nothing(world):
    r, n = world
    last = n - 1
    if r != last:
        out = hvd.allreduce(torch.tensor(value(0, r, (9,))), op=hvd.Adasum, name="adasum.join")
        want = adasum_reference([value(0, q, (9,)) if q != last else np.zeros(9)
                                 for q in range(n)])
        check(out.numpy(), want)
    hvd.join()


@pytest.mark.skipif(not POWER_OF_TWO, reason="Adasum needs a power-of-two world")
def test_distributed_optimizer_combines_the_deltas_with_adasum(world):
    """Horovod's delta optimizer: each rank steps locally, and the parameters
    become start + adasum(every rank's delta) — not the step of the averaged
    gradient."""
    r, n = world
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    lr = 0.5
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=lr),
                                   named_parameters=model.named_parameters(), op=hvd.Adasum)
    start = {k: v.detach().clone() for k, v in model.named_parameters()}
    data = torch.arange(8, dtype=torch.float32).reshape(2, 4) * (r + 1) - 3
    target = torch.full((2, 3), float(r))
    # This rank's own gradient and delta, computed as SGD's step computes it.
    probe = torch.nn.Linear(4, 3)
    probe.load_state_dict(model.state_dict())
    torch.nn.functional.mse_loss(probe(data), target).backward()
    deltas = {}
    for k, p in probe.named_parameters():
        stepped = p.detach().clone()
        stepped.add_(p.grad, alpha=-lr)
        deltas[k] = stepped - p.detach()

    opt.zero_grad()
    torch.nn.functional.mse_loss(model(data), target).backward()
    opt.step()

    for k, p in model.named_parameters():
        everyone = hvd.allgather(deltas[k].unsqueeze(0), name="adasum.deltas." + k)
        want = adasum_reference([d.numpy() for d in everyone]).reshape(p.shape)
        np.testing.assert_allclose(p.detach().numpy(), start[k].numpy() + want, rtol=1e-5,
                                   atol=1e-6)
        if k == "weight":  # and not what averaging would have given
            averaged = start[k].numpy() + everyone.numpy().mean(axis=0)
            assert not np.allclose(p.detach().numpy(), averaged, rtol=1e-5, atol=1e-6)
    with pytest.raises(AssertionError):
        with opt.skip_synchronize():
            pass
