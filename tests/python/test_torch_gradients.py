"""Every differentiable collective of kolo.torch against a numerical gradient (issue 14
item 6), in float64, with Horovod's conventions for which loss the gradient is of.

Each rank r computes y_r = op(x_r) and its loss L_r = <w_r, y_r>, and backward from
it. Rank r's x_r.grad must be dF/dx_r for the global loss F = c * sum_r L_r, where
Horovod's backward functions fix c: allreduce, grouped_allreduce and alltoall give
the gradient of the sum of the ranks' losses (c = 1); allgather and broadcast give
the gradient of their mean (c = 1/size: the upstream gradients are averaged);
reducescatter and grouped_reducescatter give size times the gradient of the sum
(c = size: Horovod's backward is the allgather of the upstream gradients times the
size for Sum and unscaled for Average, so a gradient of ones gives size per input
element for Sum and 1 for Average; test_torch_horovod_behaviours checks that
directly).

The numerical gradient is collective: for each element i of each rank k's input,
every rank evaluates F with x_k[i] moved by +-h (only rank k moves it) and sums the
losses with an allreduce. The ops are linear, so the central difference is exact up
to rounding; x, w and h are small integers.
"""

import pytest
import torch

import kolo.torch as hvd

H = 1.0


def weights_like(y, r):
    return (torch.arange(y.numel(), dtype=torch.float64).reshape(y.shape) % 5 + 1) * (r + 2)


def check_gradient(fn, shape_of, c):
    """shape_of(rank) -> that rank's input shape; fn(x) -> this rank's output."""
    r, n = hvd.rank(), hvd.size()
    x = (torch.arange(torch.Size(shape_of(r)).numel(), dtype=torch.float64) % 3 + r)
    x = x.reshape(shape_of(r)).requires_grad_()
    y = fn(x)
    w = weights_like(y, r)
    (w * y).sum().backward()
    # Every rank evaluates its loss for every move of every rank's input, in the same
    # order; one allreduce then sums them into F for each move.
    moves = [(k, i, step) for k in range(n) for i in range(torch.Size(shape_of(k)).numel())
             for step in (H, -H)]
    local = torch.zeros(len(moves), dtype=torch.float64)
    with torch.no_grad():
        for j, (k, i, step) in enumerate(moves):
            moved = x.detach().clone()
            if r == k:
                moved.view(-1)[i] += step
            local[j] = (w * fn(moved)).sum()
    F = c * hvd.allreduce(local, op=hvd.Sum)
    numeric = torch.tensor([(F[j] - F[j + 1]) / (2 * H)
                            for j, (k, i, step) in enumerate(moves) if k == r and step > 0],
                           dtype=torch.float64).reshape(x.shape)
    assert torch.allclose(x.grad, numeric, rtol=1e-12, atol=1e-12), (x.grad, numeric)


OPS = [("sum", hvd.Sum, 1.0, 1.0), ("average", hvd.Average, 1.0, 1.0),
       ("sum_scaled", hvd.Sum, 2.0, 0.25), ("average_scaled", hvd.Average, 0.5, 3.0)]
OP_IDS = [o[0] for o in OPS]


@pytest.mark.parametrize("label,op,pre,post", OPS, ids=OP_IDS)
def test_allreduce_gradient(world, label, op, pre, post):
    check_gradient(lambda x: hvd.allreduce(x, op=op, prescale_factor=pre, postscale_factor=post),
                   lambda q: (2, 3), c=1.0)


@pytest.mark.parametrize("label,op,pre,post", OPS[::3], ids=OP_IDS[::3])
def test_grouped_allreduce_gradient(world, label, op, pre, post):
    def fn(x):
        outs = hvd.grouped_allreduce([x[:1], x[1:] * 2], op=op, prescale_factor=pre,
                                     postscale_factor=post)
        return torch.cat([o.reshape(-1) for o in outs])
    check_gradient(fn, lambda q: (3, 2), c=1.0)


@pytest.mark.parametrize("label,op,pre,post", OPS, ids=OP_IDS)
def test_reducescatter_gradient(world, label, op, pre, post):
    """Rows not divisible by the size: the shards differ in size."""
    n = hvd.size()
    check_gradient(lambda x: hvd.reducescatter(x, op=op, prescale_factor=pre,
                                               postscale_factor=post),
                   lambda q: (2 * n + 1, 2), c=float(n))


def test_allgather_gradient(world):
    check_gradient(lambda x: hvd.allgather(x), lambda q: (q + 1, 2), c=1.0 / hvd.size())


def test_broadcast_gradient(world):
    for root in sorted({0, hvd.size() - 1}):
        check_gradient(lambda x: hvd.broadcast(x, root), lambda q: (2, 2), c=1.0 / hvd.size())


def test_alltoall_gradient(world):
    n = hvd.size()
    # Rank q sends d+1 rows to rank d (as a list), or an even split (no splits).
    check_gradient(lambda x: hvd.alltoall(x, splits=[d + 1 for d in range(n)])[0],
                   lambda q: (n * (n + 1) // 2, 2), c=1.0)
    check_gradient(lambda x: hvd.alltoall(x), lambda q: (2 * n, 1), c=1.0)


@pytest.mark.skipif(not hasattr(hvd, "grouped_allgather"), reason="no grouped_allgather")
def test_grouped_allgather_gradient(world):
    def fn(x):
        return torch.cat([o.reshape(-1) for o in hvd.grouped_allgather([x[:1], x[1:] * 2])])
    check_gradient(fn, lambda q: (q + 2, 2), c=1.0 / hvd.size())


@pytest.mark.skipif(not hasattr(hvd, "grouped_reducescatter"), reason="no grouped_reducescatter")
@pytest.mark.parametrize("op", [hvd.Sum, hvd.Average], ids=["sum", "average"])
def test_grouped_reducescatter_gradient(world, op):
    n = hvd.size()

    def fn(x):
        outs = hvd.grouped_reducescatter([x[:n], x[n:] * 2], op=op)
        return torch.cat([o.reshape(-1) for o in outs])
    check_gradient(fn, lambda q: (2 * n + 1, 2), c=float(n))
