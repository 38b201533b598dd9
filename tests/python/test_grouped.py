"""hvd.grouped_allgather and hvd.grouped_reducescatter (Horovod's names and
arguments), and kolo's NumPy equivalents: a list of tensors negotiated as one unit
(kolo_grouped_allgather_async / kolo_grouped_reducescatter_async). Each member's
result equals the lone collective's; a mismatch in any member fails the whole group
on every rank. Their gradients are checked numerically in test_torch_gradients.py."""

import numpy as np
import pytest

import kolo

torch = pytest.importorskip(
    "torch", reason="python3-torch is not installed (tools/setup-deps.sh installs it)")

import kolo.torch as hvd  # noqa: E402

torch.set_num_threads(1)


def member(m, r, rows, cols, dtype=torch.float32):
    return (torch.arange(rows * cols, dtype=torch.float64).reshape(rows, cols)
            + 100 * r + 1000 * m).to(dtype)


@pytest.mark.parametrize("dtype", [torch.int32, torch.float64, torch.float16], ids=str)
def test_torch_grouped_allgather_matches_each_lone_allgather(world, dtype):
    r, n = world
    # Rows differ by rank (rank 1 of three contributes none to member 1); a 3-d member.
    xs = [member(0, r, r + 1, 3, dtype), member(1, r, 0 if r == 1 else 2, 1, dtype),
          member(2, r, 1, 4, dtype).reshape(1, 2, 2)]
    outs = hvd.grouped_allgather(xs, name="ga.%s" % dtype)
    assert [o.shape for o in outs] == [
        (n * (n + 1) // 2, 3), (2 * n - (2 if n > 1 else 0), 1), (n, 2, 2)]
    for m, (x, o) in enumerate(zip(xs, outs)):
        assert o.dtype == dtype
        assert torch.equal(o, hvd.allgather(x, name="ga.lone.%s.%d" % (dtype, m)))
    handle = hvd.grouped_allgather_async(xs, name="ga.async.%s" % dtype)
    assert all(torch.equal(a, b) for a, b in zip(hvd.synchronize(handle), outs))


@pytest.mark.parametrize("op", [hvd.Sum, hvd.Average], ids=["sum", "average"])
def test_torch_grouped_reducescatter_matches_each_lone_reducescatter(world, op):
    r, n = world
    xs = [member(0, r, 2 * n + 1, 2, torch.float64), member(1, r, 1, 3, torch.float64),
          member(2, r, n, 1, torch.float64)]
    outs = hvd.grouped_reducescatter(xs, op=op, name="rs.%d" % op, prescale_factor=0.5,
                                     postscale_factor=4.0)
    for m, (x, o) in enumerate(zip(xs, outs)):
        lone = hvd.reducescatter(x, op=op, name="rs.lone.%d.%d" % (op, m), prescale_factor=0.5,
                                 postscale_factor=4.0)
        assert o.shape == lone.shape and torch.equal(o, lone), (m, o, lone)
    handle = hvd.grouped_reducescatter_async(xs, op=op, name="rs.async.%d" % op)
    got = hvd.synchronize(handle)
    assert [g.shape[0] for g in got] == [kolo._core.reducescatter_shard_rows(x.shape[0], r, n)
                                         for x in xs]


def test_torch_a_mismatch_in_one_member_fails_the_group_on_every_rank(world):
    r, n = world
    xs = [torch.ones(2, 3), torch.ones((1, 2, 3) if r == 0 else (1, 3, 2))]
    with pytest.raises(Exception) as info:
        hvd.grouped_allgather(xs, name="ga.bad")
    assert "ranks disagree on shape: [[2, 3], [1, 2, 3]] on rank 0" in str(info.value)
    ys = [torch.ones(4, 2), torch.ones((2, 3) if r == 0 else (3, 2))]
    with pytest.raises(Exception) as info:
        hvd.grouped_reducescatter(ys, op=hvd.Sum, name="rs.bad")
    assert "ranks disagree on shape: [[4, 2], [2, 3]] on rank 0" in str(info.value)
    # The names are free again, and a good group goes through.
    assert len(hvd.grouped_allgather([torch.ones(1, 3), torch.ones(1, 2, 3)],
                                     name="ga.bad")) == 2


def test_torch_bad_groups_are_refused_locally(world):
    with pytest.raises(ValueError, match="the group is empty"):
        hvd.grouped_allgather([])
    with pytest.raises(ValueError, match="share one dtype"):
        hvd.grouped_reducescatter([torch.ones(2), torch.ones(2, dtype=torch.float64)])
    with pytest.raises(ValueError, match="at least one dimension"):
        hvd.grouped_reducescatter([torch.ones(2), torch.tensor(1.0)], op=hvd.Sum)
    with pytest.raises(RuntimeError, match="Sum or Average"):  # Horovod: HorovodInternalError
        hvd.grouped_reducescatter([torch.ones(2)], op=hvd.Max)


def test_numpy_grouped_allgather_and_reducescatter(world):
    r, n = world
    xs = [np.full((r + 1, 2), r, dtype=np.int64), np.arange(3, dtype=np.int64) + r]
    outs = kolo.grouped_allgather(xs, name="np.ga")
    assert outs[0].tolist() == [[q, q] for q in range(n) for _ in range(q + 1)]
    assert outs[1].tolist() == [i + q for q in range(n) for i in range(3)]
    ys = [np.ones((n + 1, 2), dtype=np.int32) * (r + 1), np.ones((n,), dtype=np.int32)]
    shards = kolo.grouped_reducescatter(ys, op=kolo.Sum, name="np.rs")
    rows = kolo._core.reducescatter_shard_rows(n + 1, r, n)
    assert shards[0].tolist() == [[n * (n + 1) // 2] * 2] * rows
    assert shards[1].tolist() == [n]
