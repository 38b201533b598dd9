"""Horovod accepts prescale_factor / postscale_factor on integer tensors: each element
is scaled in float64 and converted back, truncating toward zero as C++ does (kolo.h
documents the rule; kolo saturates where C++ would be undefined). float16 and
bfloat16 are scaled in float32."""

import math

import numpy as np
import pytest

import kolo

torch = pytest.importorskip(
    "torch", reason="python3-torch is not installed (tools/setup-deps.sh installs it)")

import kolo.torch as hvd  # noqa: E402

torch.set_num_threads(1)

INTS = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64]


def rank_ints(r, dtype):
    signed = dtype != torch.uint8
    base = [7, -7, 3, -3, 0, 11] if signed else [7, 9, 3, 5, 0, 11]
    return [v + r for v in base]


def reference(n, dtype, pre, post, average):
    """Every rank's values scaled by pre (float64, truncated), summed, scaled by post
    (float64, truncated), then for an average divided by n (truncating)."""
    cols = zip(*[[math.trunc(v * pre) for v in rank_ints(r, dtype)] for r in range(n)])
    out = []
    for col in cols:
        s = math.trunc(sum(col) * post)
        out.append(int(s / n) if average else s)  # |s| is small: exact in float
    return out


@pytest.mark.parametrize("dtype", INTS, ids=str)
@pytest.mark.parametrize("op", [hvd.Sum, hvd.Average], ids=["sum", "average"])
def test_torch_integer_allreduce_takes_factors(world, dtype, op):
    r, n = world
    x = torch.tensor(rank_ints(r, dtype), dtype=dtype)
    out = hvd.allreduce(x, op=op, prescale_factor=0.5, postscale_factor=3.0,
                        name="int.scale.%s.%d" % (dtype, op))
    assert out.dtype == dtype
    assert out.tolist() == reference(n, dtype, 0.5, 3.0, op == hvd.Average)


def test_torch_integer_grouped_allreduce_and_reducescatter_take_factors(world):
    r, n = world
    x = torch.tensor(rank_ints(r, torch.int32), dtype=torch.int32)
    [g] = hvd.grouped_allreduce([x], op=hvd.Sum, prescale_factor=-1.5, name="int.scale.g")
    assert g.tolist() == reference(n, torch.int32, -1.5, 1.0, False)
    rows = torch.tensor([rank_ints(r, torch.int32)] * n, dtype=torch.int32)
    shard = hvd.reducescatter(rows, op=hvd.Sum, postscale_factor=0.5, name="int.scale.rs")
    assert shard.tolist() == [reference(n, torch.int32, 1.0, 0.5, False)]


def test_torch_bool_still_refuses_factors(world):
    with pytest.raises(ValueError, match="numeric dtype"):
        hvd.allreduce(torch.ones(3, dtype=torch.bool), op=hvd.Max, prescale_factor=2.0,
                      name="bool.scale")


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_torch_half_scales_in_float32(world, dtype):
    r, n = world
    # 3 * float32(1/3) is exactly 1 in float32; in float64 it is 1 - 2^-54, which the
    # rounding to 16 bits would also take to 1: the float32 product matches either way,
    # and every sum is exact.
    x = torch.full((5,), 3.0, dtype=dtype)
    out = hvd.allreduce(x, op=hvd.Sum, prescale_factor=1.0 / 3, postscale_factor=0.5,
                        name="half.scale.%s" % dtype)
    assert out.tolist() == [n * 0.5] * 5


def test_numpy_integer_allreduce_takes_factors(world):
    r, n = world
    x = np.array(rank_ints(r, torch.int64), dtype=np.int64)
    out = kolo.allreduce(x, op=kolo.Sum, prescale_factor=0.5, postscale_factor=3.0,
                         name="np.int.scale")
    assert out.tolist() == reference(n, torch.int64, 0.5, 3.0, False)
