"""kolo.torch's collectives: Horovod's names, every torch dtype kolo shares, exact
values, async handles, autograd, and Horovod's exception types."""

import pytest

torch = pytest.importorskip(
    "torch", reason="python3-torch is not installed (tools/setup-deps.sh installs it)")

import kolo.torch as hvd  # noqa: E402
from conftest import needs  # noqa: E402

torch.set_num_threads(1)

NUMERIC = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16,
           torch.bfloat16, torch.float32, torch.float64]
OPS = [hvd.Sum, hvd.Average, hvd.Min, hvd.Max, hvd.Product]


def rank_values(r, n, count, dtype, op):
    """As in test_numpy_ops: exact in every dtype; sums divisible by n."""
    i = torch.arange(count)
    if op == hvd.Product:
        v = 1 + (i + r) % 2
        if dtype != torch.uint8:
            v = torch.where((i + r) % 3 == 0, -v, v)
        return v.to(dtype)
    base = n * n // 2 + 1 + i % 7
    offset = r if r < n - 1 else -(n - 1) * (n - 2) // 2
    return (base + offset).to(dtype)


def expected(n, count, dtype, op):
    stack = torch.stack([rank_values(r, n, count, dtype, op).double() for r in range(n)])
    out = {hvd.Sum: lambda s: s.sum(0), hvd.Average: lambda s: s.sum(0) / n,
           hvd.Min: lambda s: s.min(0).values, hvd.Max: lambda s: s.max(0).values,
           hvd.Product: lambda s: s.prod(0)}[op](stack)
    return out.to(dtype)


@pytest.fixture
def world():
    return hvd.rank(), hvd.size()


@pytest.mark.parametrize("dtype", NUMERIC, ids=str)
@pytest.mark.parametrize("op", OPS, ids=["sum", "average", "min", "max", "product"])
def test_allreduce_every_dtype_and_op(world, dtype, op):
    r, n = world
    for count in (0, 1, n + 1, 1000):
        x = rank_values(r, n, count, dtype, op).reshape(-1, 1)
        y = hvd.allreduce(x, op=op, name="t.%s.%d.%d" % (dtype, op, count))
        assert y.dtype == dtype and y.shape == x.shape
        assert torch.equal(y, expected(n, count, dtype, op).reshape(-1, 1))
        assert torch.equal(x, rank_values(r, n, count, dtype, op).reshape(-1, 1))


def test_allreduce_bool(world):
    r, n = world
    i = torch.arange(32)
    x = ((i >> r) & 1).bool()
    union = torch.zeros(32, dtype=torch.bool)
    inter = torch.ones(32, dtype=torch.bool)
    for q in range(n):
        union |= ((i >> q) & 1).bool()
        inter &= ((i >> q) & 1).bool()
    assert torch.equal(hvd.allreduce(x, op=hvd.Sum), union)
    assert torch.equal(hvd.allreduce(x, op=hvd.Max), union)
    assert torch.equal(hvd.allreduce(x, op=hvd.Min), inter)
    assert torch.equal(hvd.allreduce(x, op=hvd.Product), inter)


def test_in_place_non_contiguous_and_average_flag(world):
    r, n = world
    x = torch.full((4, 6), float(r + 1))
    assert hvd.allreduce_(x, op=hvd.Sum) is x
    assert torch.equal(x, torch.full((4, 6), n * (n + 1) / 2))
    t = torch.arange(24.0).reshape(4, 6).t() * (r + 1)
    assert not t.is_contiguous()
    assert torch.equal(hvd.allreduce(t, op=hvd.Sum), torch.arange(24.0).reshape(4, 6).t()
                       * (n * (n + 1) / 2))
    hvd.allreduce_(t, op=hvd.Sum)
    assert not t.is_contiguous()
    assert torch.equal(t, torch.arange(24.0).reshape(4, 6).t() * (n * (n + 1) / 2))
    with pytest.warns(DeprecationWarning):
        avg = hvd.allreduce(torch.full((3,), 2.0 * n), average=True)
    assert torch.equal(avg, torch.full((3,), 2.0 * n))
    scaled = hvd.allreduce(torch.ones(3, dtype=torch.float64), op=hvd.Sum,
                           prescale_factor=4.0, postscale_factor=0.5)
    assert torch.equal(scaled, torch.full((3,), 2.0 * n, dtype=torch.float64))


def test_async_handles_and_poll(world):
    r, n = world
    # With two or more ranks the last one submits only after every other rank has
    # polled (the blocking "ta.polled" orders it), so nothing can be done at those
    # polls: poll() must say False. With one rank nothing waits on a peer, and a fast
    # machine finishes all 40 before the first poll, so there is nothing to assert.
    last = r == n - 1 and n > 1
    if last:
        hvd.allreduce(torch.zeros(1), name="ta.polled")
    tensors = [torch.full((5000,), float(r + k)) for k in range(40)]
    handles = [hvd.allreduce_async(t, op=hvd.Sum, name="ta.%d" % k) for k, t in enumerate(tensors)]
    polls = [hvd.poll(h) for h in handles]
    in_place = [hvd.allreduce_async_(torch.full((10,), 1.0), op=hvd.Sum) for _ in range(5)]
    if n > 1 and not last:
        assert not any(polls), "poll() returned True before the last rank had submitted"
        hvd.allreduce(torch.zeros(1), name="ta.polled")
    for k, h in enumerate(handles):
        assert torch.equal(hvd.synchronize(h), torch.full((5000,), n * (n - 1) / 2 + n * k))
        assert hvd.poll(h)
    for h in in_place:
        assert torch.equal(hvd.synchronize(h), torch.full((10,), float(n)))


def test_allreduce_autograd(world):
    r, n = world
    x = torch.arange(4.0, requires_grad=True)
    y = hvd.allreduce(x, op=hvd.Sum, name="grad.sum") * (r + 1)
    y.sum().backward()
    assert torch.equal(x.grad, torch.full((4,), n * (n + 1) / 2))
    x.grad = None
    hvd.allreduce(x, op=hvd.Average).mul(r + 1).sum().backward()
    assert torch.allclose(x.grad, torch.full((4,), (n + 1) / 2))


def test_mismatch_is_horovod_internal_error_on_every_rank(world):
    r, n = world
    dtype = torch.float64 if r == 0 else torch.float32
    with pytest.raises(hvd.HorovodInternalError) as info:
        hvd.allreduce(torch.ones(3, dtype=dtype), name="t.mismatch")
    assert isinstance(info.value, RuntimeError)
    assert "t.mismatch" in str(info.value) and "dtype" in str(info.value)
    shape = (4,) if r == n - 1 else (3,)
    with pytest.raises(RuntimeError):
        hvd.allreduce(torch.ones(shape), name="t.mismatch.shape")


def test_bad_arguments_are_value_errors(world):
    with pytest.raises(ValueError):
        hvd.allreduce(torch.ones(2, dtype=torch.complex64))
    with pytest.raises(ValueError):
        hvd.allreduce(torch.ones(2), op=hvd.Sum, average=True)
    with pytest.raises(ValueError):
        hvd.allreduce([1.0, 2.0])
    with pytest.raises(ValueError):
        hvd.DistributedOptimizer(torch.optim.SGD([torch.ones(1, requires_grad=True)], lr=1),
                                 op=hvd.Sum, gradient_predivide_factor=2.0)


def test_gpu_tensors_without_nccl_fail_clearly():
    if hvd.nccl_built() or not torch.cuda.is_available():
        pytest.skip("needs a CUDA device and a libkolo without NCCL")
    with pytest.raises(hvd.UnsupportedError, match="NCCL"):
        hvd.allreduce(torch.ones(2, device="cuda"))


def test_capabilities():
    assert hvd.mpi_built() and hvd.mpi_enabled() and hvd.is_initialized()
    assert not hvd.gloo_built() and not hvd.gloo_enabled()
    assert hvd.cuda_built() == (hvd.nccl_built() != 0)
    assert 0 <= hvd.local_rank() < hvd.local_size()


def test_duplicate_name_is_value_and_runtime_error(world):
    r, n = world
    for late in (n - 1, 0):
        if r != late:
            h = hvd.allreduce_async(torch.ones(4), op=hvd.Sum, name="tdup.%d" % late)
            with pytest.raises(ValueError):
                hvd.allreduce_async(torch.ones(4), op=hvd.Sum, name="tdup.%d" % late)
        hvd.allreduce(torch.zeros(1), name="tdup.gate.%d" % late)
        if r == late:
            h = hvd.allreduce_async(torch.ones(4), op=hvd.Sum, name="tdup.%d" % late)
        assert torch.equal(hvd.synchronize(h), torch.full((4,), float(n)))


@needs("kolo_grouped_allreduce_async")
def test_grouped_allreduce_variants(world):
    r, n = world
    ts = [torch.full((k + 1, 2), float(r + k)) for k in range(4)]
    want = [torch.full((k + 1, 2), n * (n - 1) / 2 + n * k) for k in range(4)]
    for got, w in zip(hvd.grouped_allreduce(ts, op=hvd.Sum), want):
        assert torch.equal(got, w)
    h = hvd.grouped_allreduce_async(ts, op=hvd.Sum, name="g.async")
    for got, w in zip(hvd.synchronize(h), want):
        assert torch.equal(got, w)
    hvd.grouped_allreduce_(ts, op=hvd.Sum, name="g.inplace")
    for got, w in zip(ts, want):
        assert torch.equal(got, w)
    with pytest.raises(ValueError):
        hvd.grouped_allreduce([torch.ones(1), torch.ones(1, dtype=torch.float64)])


@needs("kolo_allgather_async")
@pytest.mark.parametrize("dtype", NUMERIC + [torch.bool], ids=str)
def test_allgather_every_dtype(world, dtype):
    r, n = world
    x = torch.full((r + 1, 2, 3), r + 1).to(dtype) if dtype != torch.bool else \
        torch.full((r + 1, 2, 3), r % 2 == 1)
    y = hvd.allgather(x, name="tg.%s" % dtype)
    parts = [torch.full((q + 1, 2, 3), q + 1).to(dtype) if dtype != torch.bool else
             torch.full((q + 1, 2, 3), q % 2 == 1) for q in range(n)]
    assert y.dtype == dtype and torch.equal(y, torch.cat(parts))


@needs("kolo_allgather_async")
def test_allgather_autograd_and_async(world):
    r, n = world
    x = torch.full((r + 1, 2), float(r), requires_grad=True)
    y = hvd.allgather(x)
    weights = torch.arange(float(y.shape[0])).reshape(-1, 1)
    (y * weights).sum().backward()
    # d/dx of sum(w * gathered) is this rank's rows of w, averaged over ranks (Horovod).
    offset = r * (r + 1) // 2
    assert torch.equal(x.grad, weights[offset:offset + r + 1].expand(r + 1, 2))
    h = hvd.allgather_async(torch.tensor([r]))
    assert torch.equal(hvd.synchronize(h), torch.arange(n))


@needs("kolo_broadcast_async")
@pytest.mark.parametrize("dtype", NUMERIC + [torch.bool], ids=str)
def test_broadcast_every_dtype(world, dtype):
    r, n = world
    for root in range(n):
        x = torch.full((3, 2), r % 2 == 1) if dtype == torch.bool else \
            torch.full((3, 2), r + 1).to(dtype)
        want = torch.full((3, 2), root % 2 == 1) if dtype == torch.bool else \
            torch.full((3, 2), root + 1).to(dtype)
        assert torch.equal(hvd.broadcast(x, root, name="tb.%s.%d" % (dtype, root)), want)
        assert hvd.broadcast_(x, root, name="tb_.%s.%d" % (dtype, root)) is x
        assert torch.equal(x, want)


@needs("kolo_broadcast_async")
def test_broadcast_object_and_autograd(world):
    r, n = world
    obj = hvd.broadcast_object({"rank": r, "list": list(range(r + 3))}, root_rank=n - 1)
    assert obj == {"rank": n - 1, "list": list(range(n + 2))}
    x = torch.full((2,), float(r), requires_grad=True)
    hvd.broadcast(x, 0).sum().backward()
    assert torch.equal(x.grad, torch.full((2,), 1.0 if r == 0 else 0.0))


@needs("kolo_allgather_async")
def test_allgather_object(world):
    r, n = world
    assert hvd.allgather_object(("r", r, "x" * r)) == [("r", q, "x" * q) for q in range(n)]


@needs("kolo_alltoall_async")
def test_alltoall(world):
    r, n = world
    x = torch.arange(n * 2).reshape(n * 2, 1) + 10 * r
    y = hvd.alltoall(x)
    want = torch.cat([torch.arange(2 * r, 2 * r + 2).reshape(2, 1) + 10 * q for q in range(n)])
    assert torch.equal(y, want)
    splits = torch.tensor([d + 1 for d in range(n)], dtype=torch.int32)
    rows = torch.tensor([[r, d] for d in range(n) for _ in range(d + 1)], dtype=torch.float32,
                        requires_grad=True)
    out, received = hvd.alltoall(rows, splits=splits)
    assert torch.equal(received, torch.full((n,), r + 1, dtype=torch.int32))
    assert torch.equal(out, torch.tensor([[q, r] for q in range(n) for _ in range(r + 1)],
                                         dtype=torch.float32))
    out.sum().backward()
    assert torch.equal(rows.grad, torch.ones_like(rows))


@needs("kolo_reducescatter_async")
def test_reducescatter(world):
    r, n = world
    rows = 2 * n + 1
    x = torch.arange(rows * 3, dtype=torch.float32).reshape(rows, 3) * (r + 1)
    total = torch.arange(rows * 3, dtype=torch.float32).reshape(rows, 3) * (n * (n + 1) / 2)
    q, m = divmod(rows, n)
    start = r * q + min(r, m)
    stop = start + q + (1 if r < m else 0)
    assert torch.equal(hvd.reducescatter(x, op=hvd.Sum), total[start:stop])
    assert torch.equal(hvd.reducescatter(x * n), total[start:stop])  # default op: Average


@needs("kolo_join")
def test_join_with_uneven_batches(world):
    """Rank r runs r+1 steps; a joined rank contributes zeros, and Average still
    divides by the full world size."""
    r, n = world
    for step in range(r + 1):
        got = hvd.allreduce(torch.tensor([float(r + 1)]), op=hvd.Sum, name="join.sum.%d" % step)
        assert float(got) == sum(q + 1 for q in range(step, n))
        avg = hvd.allreduce(torch.tensor([6.0 * n]), op=hvd.Average, name="join.avg.%d" % step)
        assert float(avg) == 6.0 * (n - step)
    assert hvd.join() == n - 1
    assert float(hvd.allreduce(torch.ones(1), op=hvd.Sum, name="after.join")) == n


@needs("kolo_barrier")
def test_barrier():
    hvd.barrier()


def test_deterministic_allreduce_is_the_rank_order_fold(world):
    r, n = world
    g = torch.Generator().manual_seed(99 + r)
    x = torch.randn(50001, generator=g) * torch.exp2(torch.randint(-6, 7, (50001,), generator=g).float())
    stack = hvd.allgather(x.reshape(1, -1), name="torch.det.inputs")
    want = stack[0].clone()
    for row in stack[1:]:
        want = want + row
    y = hvd.allreduce(x, op=hvd.Sum, name="torch.det", deterministic=True)
    assert torch.equal(y, want)
    z = x.clone()
    hvd.allreduce_(z, op=hvd.Sum, name="torch.det_", deterministic=True)
    assert torch.equal(z, want)
