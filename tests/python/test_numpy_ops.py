"""kolo's NumPy API under mpiexec: every collective, dtype and op with exact values."""

import os
import subprocess
import sys

import numpy as np
import pytest

import kolo
from conftest import REPO, needs

INT_DTYPES = [np.uint8, np.int8, np.uint16, np.int16, np.int32, np.int64]
FLOAT_DTYPES = [np.float16, np.float32, np.float64]
NUMERIC = INT_DTYPES + FLOAT_DTYPES
COUNTS = [0, 1, 2, 5, 1000, 65537]


def rank_values(r, n, count, dtype, op):
    """Rank r's input: small values whose reduction is exact in every dtype, and whose
    sum over ranks is divisible by n (so Average is exact too)."""
    i = np.arange(count)
    if op == kolo.Product:
        v = 1 + (i + r) % 2                             # 1 or 2: products <= 2**n
        if np.dtype(dtype).kind in "if":
            v = np.where((i + r) % 3 == 0, -v, v)       # signed: include negatives
        return v.astype(dtype)
    base = n * n // 2 + 1 + i % 7                   # >= the largest negative offset
    offset = r if r < n - 1 else -(n - 1) * (n - 2) // 2  # offsets sum to 0 over ranks
    return (base + offset).astype(dtype)


def expected(n, count, dtype, op):
    stack = np.stack([rank_values(r, n, count, dtype, op).astype(np.float64) for r in range(n)])
    if op == kolo.Sum:
        out = stack.sum(0)
    elif op == kolo.Average:
        out = stack.sum(0) / n
    elif op == kolo.Min:
        out = stack.min(0)
    elif op == kolo.Max:
        out = stack.max(0)
    else:
        out = stack.prod(0)
    return out.astype(dtype)


@pytest.mark.parametrize("dtype", NUMERIC, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("op", [kolo.Sum, kolo.Average, kolo.Min, kolo.Max, kolo.Product],
                         ids=["sum", "average", "min", "max", "product"])
def test_allreduce_every_dtype_and_op(world, dtype, op):
    r, n = world
    for count in (0, 1, n - 1, 1000):
        x = rank_values(r, n, count, dtype, op)
        before = x.copy()
        y = kolo.allreduce(x, op=op, name="np.%s.%d.%d" % (np.dtype(dtype).name, op, count))
        assert y.dtype == x.dtype and y.shape == x.shape
        np.testing.assert_array_equal(y, expected(n, count, dtype, op))
        np.testing.assert_array_equal(x, before)  # the input is only read


@pytest.mark.parametrize("op,expect", [(kolo.Sum, np.logical_or), (kolo.Max, np.logical_or),
                                       (kolo.Min, np.logical_and),
                                       (kolo.Product, np.logical_and)])
def test_allreduce_bool(world, op, expect):
    r, n = world
    i = np.arange(64)
    x = ((i >> r) & 1).astype(bool)
    want = ((i >> 0) & 1).astype(bool)
    for q in range(1, n):
        want = expect(want, ((i >> q) & 1).astype(bool))
    np.testing.assert_array_equal(kolo.allreduce(x, op=op), want)


def test_average_on_bool_is_a_value_error(world):
    with pytest.raises(ValueError):
        kolo.allreduce(np.ones(3, bool), op=kolo.Average, name="bool.average")


@pytest.mark.parametrize("count", COUNTS)
def test_allreduce_counts_and_in_place(world, count):
    r, n = world
    x = np.arange(count, dtype=np.float32) * (r + 1)
    out = kolo.allreduce(x, op=kolo.Sum, out=x)
    assert out is x
    np.testing.assert_array_equal(x, np.arange(count, dtype=np.float32) * (n * (n + 1) // 2))


def test_allreduce_keeps_shape_and_scales(world):
    r, n = world
    x = np.full((3, 4, 5), r + 1, dtype=np.float64)
    y = kolo.allreduce(x, op=kolo.Sum, prescale_factor=2.0, postscale_factor=0.25)
    assert y.shape == (3, 4, 5)
    np.testing.assert_array_equal(y, np.full((3, 4, 5), 2.0 * n * (n + 1) / 2 * 0.25))


def test_default_op_is_average_and_names_are_optional(world):
    r, n = world
    y = kolo.allreduce(np.full(4, 2 * n, dtype=np.int32) * (r + 1))
    np.testing.assert_array_equal(y, np.full(4, (n + 1) * n, dtype=np.int32))


def test_zero_copy_output_and_bad_arguments(world):
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    with pytest.raises(ValueError, match="not C-contiguous"):
        kolo.allreduce(x.T, name="noncontig")
    with pytest.raises(ValueError, match="not supported"):
        kolo.allreduce(np.ones(2, np.complex64), name="complex")
    with pytest.raises(ValueError, match="out"):
        kolo.allreduce(x, out=np.empty((4, 3), np.float32), name="badout")
    ro = np.ones(3, np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="writeable"):
        kolo.allreduce(np.ones(3, np.float32), out=ro, name="readonly")
    with pytest.raises(ValueError):
        kolo.allreduce(x, op=99, name="badop")
    with pytest.raises(ValueError):
        kolo.allreduce(x, name=7)


def test_async_stream_and_poll(world):
    r, n = world
    arrays = [np.full(10000, r + k, dtype=np.int64) for k in range(40)]
    handles, polls = [], []
    for k, a in enumerate(arrays):
        handles.append(kolo.allreduce_async(a, op=kolo.Sum, name="stream.%d" % k))
        polls.append(kolo.poll(handles[-1]))
    assert not all(polls), "poll() returned True for every operation right after submission"
    for k in reversed(range(len(handles))):
        out = kolo.synchronize(handles[k])
        np.testing.assert_array_equal(out, np.full(10000, n * (n - 1) // 2 + n * k))
        assert kolo.poll(handles[k])


def test_dropped_handle_keeps_buffers_alive(world):
    r, n = world
    h = kolo.allreduce_async(np.ones(1000, np.float32), op=kolo.Sum, name="dropped")
    del h  # the arrays must stay alive until the operation completes
    y = kolo.allreduce(np.ones(3, np.float32), op=kolo.Sum, name="after.dropped")
    np.testing.assert_array_equal(y, np.full(3, n, np.float32))


@pytest.mark.parametrize("what", ["dtype", "count", "op"])
def test_mismatch_raises_on_every_rank(world, what):
    r, n = world
    dtype = np.float64 if (what == "dtype" and r == n - 1) else np.float32
    count = 5 if (what == "count" and r == 0) else 4
    op = kolo.Max if (what == "op" and r == 1) else kolo.Sum
    with pytest.raises(kolo.MismatchError) as info:
        kolo.allreduce(np.ones(count, dtype), op=op, name="mismatch." + what)
    assert isinstance(info.value, RuntimeError)
    assert isinstance(info.value, kolo.HorovodInternalError)
    assert "mismatch." + what in str(info.value)
    # Other tensors go on.
    y = kolo.allreduce(np.ones(2, np.float32), op=kolo.Sum, name="after.mismatch." + what)
    np.testing.assert_array_equal(y, np.full(2, n, np.float32))


def test_duplicate_name_in_flight(world):
    """A name already in flight on this rank is refused. The rank that submits last
    could see its first submission complete at once, so each round has one late rank
    that only submits after the others have checked."""
    r, n = world
    for late in (n - 1, 0):
        name = "dup.%d" % late
        x = np.ones(8, np.float32)
        if r != late:
            h = kolo.allreduce_async(x, op=kolo.Sum, name=name)
            with pytest.raises(kolo.DuplicateNameError) as info:
                kolo.allreduce_async(np.ones(8, np.float32), op=kolo.Sum, name=name)
            assert isinstance(info.value, ValueError) and isinstance(info.value, RuntimeError)
        kolo.allreduce(np.zeros(1, np.int32), name="dup.gate.%d" % late)
        if r == late:
            h = kolo.allreduce_async(x, op=kolo.Sum, name=name)
        np.testing.assert_array_equal(kolo.synchronize(h), np.full(8, n, np.float32))


def test_topology(world):
    r, n = world
    assert kolo.is_initialized()
    assert 0 <= kolo.local_rank() < kolo.local_size() <= n
    assert 0 <= kolo.cross_rank() < kolo.cross_size()
    assert kolo.local_size() * kolo.cross_size() == n
    ranks = kolo.allreduce(np.eye(n, dtype=np.int32)[r], op=kolo.Sum, name="ranks")
    np.testing.assert_array_equal(ranks, np.ones(n, np.int32))


def test_missing_library_error_names_paths():
    env = dict(os.environ, KOLO_LIBRARY="/nonexistent/libkolo.so",
               PYTHONPATH=os.path.join(REPO, "bindings", "python"))
    for key in list(env):
        if key.startswith(("PMI_", "MPI", "HYDRA")):
            del env[key]
    proc = subprocess.run(
        [sys.executable, "-c", "import kolo; kolo.library_path()"], env=env,
        capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert "LibraryNotFoundError" in proc.stderr
    assert "/nonexistent/libkolo.so" in proc.stderr


# ---- the other collectives -----------------------------------------------------------

@needs("kolo_grouped_allreduce_async")
@pytest.mark.parametrize("dtype", [np.int32, np.float32, np.float64])
def test_grouped_allreduce(world, dtype):
    r, n = world
    arrays = [np.full(c, r + 1 + k, dtype) for k, c in enumerate((0, 1, 7, 1000))]
    outs = kolo.grouped_allreduce(arrays, op=kolo.Sum, name="group.%s" % np.dtype(dtype).name)
    for k, (a, o) in enumerate(zip(arrays, outs)):
        np.testing.assert_array_equal(o, np.full(a.shape, n * (n + 1) // 2 + n * k, dtype))


@needs("kolo_allgather_async")
@pytest.mark.parametrize("dtype", NUMERIC + [np.bool_], ids=lambda d: np.dtype(d).name)
def test_allgather_uneven_rows(world, dtype):
    r, n = world
    x = np.full((r + 1, 3), r % 2 if dtype == np.bool_ else r + 1, dtype)
    y = kolo.allgather(x, name="gather.%s" % np.dtype(dtype).name)
    want = np.concatenate([np.full((q + 1, 3), q % 2 if dtype == np.bool_ else q + 1, dtype)
                           for q in range(n)])
    assert y.dtype == x.dtype
    np.testing.assert_array_equal(y, want)


@needs("kolo_allgather_async")
def test_allgather_zero_rows_on_some_ranks(world):
    r, n = world
    x = np.arange(2 * r, dtype=np.int64).reshape(r, 2)
    y = kolo.allgather(x, name="gather.zero")
    np.testing.assert_array_equal(y, np.concatenate([np.arange(2 * q).reshape(q, 2)
                                                     for q in range(n)]))


@needs("kolo_broadcast_async")
@pytest.mark.parametrize("dtype", NUMERIC + [np.bool_], ids=lambda d: np.dtype(d).name)
def test_broadcast_every_root(world, dtype):
    r, n = world
    for root in range(n):
        x = (np.arange(100) % 2 == r % 2) if dtype == np.bool_ else \
            np.arange(100).astype(dtype) + r
        want = (np.arange(100) % 2 == root % 2) if dtype == np.bool_ else \
            np.arange(100).astype(dtype) + root
        np.testing.assert_array_equal(kolo.broadcast(x, root, name="bcast.%d" % root), want)
        kolo.broadcast(x, root, name="bcast.inplace.%d" % root, out=x)
        np.testing.assert_array_equal(x, want)


@needs("kolo_broadcast_async")
def test_broadcast_bad_root(world):
    r, n = world
    with pytest.raises(ValueError):
        kolo.broadcast(np.ones(3), n, name="bcast.badroot")


@needs("kolo_alltoall_async")
def test_alltoall_even_and_uneven(world):
    r, n = world
    x = (np.arange(2 * n) + 100 * r).astype(np.int32)
    y = kolo.alltoall(x, name="a2a.even")
    want = np.concatenate([np.arange(2 * r, 2 * r + 2) + 100 * q for q in range(n)])
    np.testing.assert_array_equal(y, want)
    # Rank r sends d+1 rows to rank d; each row is [r, d].
    splits = [d + 1 for d in range(n)]
    rows = np.array([[r, d] for d in range(n) for _ in range(d + 1)], np.float32)
    out, received = kolo.alltoall(rows, splits=splits, name="a2a.uneven")
    np.testing.assert_array_equal(received, np.full(n, r + 1))
    np.testing.assert_array_equal(out, np.array([[q, r] for q in range(n) for _ in range(r + 1)],
                                                np.float32))


@needs("kolo_reducescatter_async")
@pytest.mark.parametrize("rows", [1, 2, 3, 7, 8])
def test_reducescatter(world, rows):
    r, n = world
    x = np.arange(rows * 2, dtype=np.float32).reshape(rows, 2) * (r + 1)
    shard = kolo.reducescatter(x, op=kolo.Sum, name="rs.%d" % rows)
    q, m = divmod(rows, n)
    start = r * q + min(r, m)
    stop = start + q + (1 if r < m else 0)
    total = np.arange(rows * 2, dtype=np.float32).reshape(rows, 2) * (n * (n + 1) // 2)
    np.testing.assert_array_equal(shard, total[start:stop])
    avg = kolo.reducescatter(x * n, op=kolo.Average, name="rs.avg.%d" % rows)
    np.testing.assert_array_equal(avg, total[start:stop])


@needs("kolo_barrier")
def test_barrier(world):
    for _ in range(3):
        kolo.barrier()


def _rank_order_sum(stack, acc_dtype, out_dtype):
    """The reference of docs/deterministic.md: rank 0's value, then rank 1's, ... in
    the accumulation type, rounded once."""
    acc = stack[0].astype(acc_dtype)
    for row in stack[1:]:
        acc = (acc + row.astype(acc_dtype)).astype(acc_dtype)
    return acc.astype(out_dtype)


@pytest.mark.parametrize("dtype,acc", [(np.float32, np.float32), (np.float64, np.float64),
                                       (np.float16, np.float32)], ids=["f32", "f64", "f16"])
def test_deterministic_allreduce_is_the_rank_order_fold(world, dtype, acc):
    r, n = world
    rng = np.random.default_rng(1234 + r)
    count = 70001
    x = (rng.standard_normal(count) * np.exp2(rng.integers(-6, 7, count))).astype(dtype)
    stack = kolo.allgather(x.reshape(1, count), name="np.det.inputs.%s" % np.dtype(dtype).name)
    want = _rank_order_sum(stack, acc, dtype)
    y = kolo.allreduce(x, op=kolo.Sum, name="np.det.%s" % np.dtype(dtype).name, deterministic=True)
    assert y.tobytes() == want.tobytes()
    ys = kolo.grouped_allreduce([x, x[:5]], op=kolo.Sum, name="np.det.group.%s" % np.dtype(dtype).name,
                                deterministic=True)
    assert ys[0].tobytes() == want.tobytes() and ys[1].tobytes() == want[:5].tobytes()
