"""Horovod refuses a collective whose shapes differ between ranks even when the
element counts agree ([2, 3] on one rank, [3, 2] on another), and a 0-dimensional
tensor for reducescatter. kolo.torch and kolo's NumPy front end pass every tensor's
shape (kolo.h, kolo_options_t), so the failure reaches every rank and names each
rank's shape (the exception's class is the mismatch's, whatever kolo.torch maps it
to)."""

import numpy as np
import pytest

import kolo

torch = pytest.importorskip(
    "torch", reason="python3-torch is not installed (tools/setup-deps.sh installs it)")

import kolo.torch as hvd  # noqa: E402

torch.set_num_threads(1)


def split_shape(r, mine, theirs):
    return mine if r == 0 else theirs


def shapes_named(n, rank0, others):
    """What every rank's message says: "[2, 3] on rank 0; [3, 2] on rank(s) ...". """
    ranks = "rank 1" if n == 2 else "ranks " + ",".join(str(i) for i in range(1, n))
    return "ranks disagree on shape: %s on rank 0; %s on %s" % (rank0, others, ranks)


def expect_shape_mismatch(call, n, rank0="[2, 3]", others="[3, 2]"):
    with pytest.raises(Exception) as info:
        call()
    assert shapes_named(n, rank0, others) in str(info.value), str(info.value)


TORCH_CALLS = {
    "allreduce": lambda t, name: hvd.allreduce(t, name=name, op=hvd.Sum),
    "allreduce_async_": lambda t, name: hvd.synchronize(hvd.allreduce_async_(t, name=name)),
    "broadcast": lambda t, name: hvd.broadcast(t, root_rank=0, name=name),
    "reducescatter": lambda t, name: hvd.reducescatter(t, name=name, op=hvd.Sum),
    "grouped_allreduce": lambda t, name: hvd.grouped_allreduce([t], name=name, op=hvd.Sum),
}


@pytest.mark.parametrize("which", sorted(TORCH_CALLS))
def test_torch_equal_counts_different_shapes_fail_on_every_rank(world, which):
    r, n = world
    t = torch.ones(split_shape(r, (2, 3), (3, 2)))
    if which == "grouped_allreduce":
        with pytest.raises(Exception) as info:
            TORCH_CALLS[which](t, "shape." + which)
        assert "[[2, 3]] on rank 0; [[3, 2]] on rank" in str(info.value), str(info.value)
        return
    expect_shape_mismatch(lambda: TORCH_CALLS[which](t, "shape." + which), n)
    # The same name with agreeing shapes works afterwards, and its result keeps the shape.
    out = TORCH_CALLS[which](torch.ones(2, 3), "shape." + which)
    assert out.shape[1:] == (3,)


def test_torch_allgather_rows_may_differ_but_not_the_rest(world):
    r, n = world
    out = hvd.allgather(torch.full((r + 1, 2, 3), float(r)), name="shape.gather")
    assert out.shape == (n * (n + 1) // 2, 2, 3)
    t = torch.zeros(split_shape(r, (1, 2, 3), (1, 3, 2)))
    expect_shape_mismatch(lambda: hvd.allgather(t, name="shape.gather_bad"), n,
                          "[1, 2, 3]", "[1, 3, 2]")


def test_torch_alltoall_rows_may_differ_but_not_the_rest(world):
    r, n = world
    t = torch.zeros(split_shape(r, (n, 2, 3), (n, 3, 2)))
    expect_shape_mismatch(lambda: hvd.alltoall(t, name="shape.a2a"), n,
                          "[%d, 2, 3]" % n, "[%d, 3, 2]" % n)


def test_torch_reducescatter_refuses_a_scalar(world):
    with pytest.raises(ValueError, match="at least one dimension"):
        hvd.reducescatter(torch.tensor(1.0), name="shape.scalar", op=hvd.Sum)


def test_torch_scalars_still_allreduce_and_allgather(world):
    r, n = world
    assert hvd.allreduce(torch.tensor(float(r)), op=hvd.Sum, name="shape.s").item() == \
        n * (n - 1) / 2
    assert hvd.allgather(torch.tensor(float(r)), name="shape.sg").tolist() == \
        [float(i) for i in range(n)]


def test_numpy_equal_counts_different_shapes_fail_on_every_rank(world):
    r, n = world
    a = np.ones(split_shape(r, (2, 3), (3, 2)), dtype=np.float32)
    expect_shape_mismatch(lambda: kolo.allreduce(a, op=kolo.Sum, name="np.shape.ar"), n)
    expect_shape_mismatch(lambda: kolo.broadcast(a, 0, name="np.shape.bc"), n)
    expect_shape_mismatch(lambda: kolo.reducescatter(a, op=kolo.Sum, name="np.shape.rs"), n)
    with pytest.raises(Exception, match=r"\[\[2, 3\]\] on rank 0; \[\[3, 2\]\] on rank"):
        kolo.grouped_allreduce([a], op=kolo.Sum, name="np.shape.g")
