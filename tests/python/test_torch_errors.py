"""Exception classes as Horovod raises them (issue 14 item 7): a local argument error
is a ValueError or TypeError raised before anything starts; an error that comes out
of a collective - from other ranks or the negotiation - is HorovodInternalError, a
RuntimeError, on every rank that took part."""

import pytest
import torch

import kolo
import kolo.torch as hvd
from kolo import _core, _lib

STATUSES = sorted((name, value) for name, value in vars(_lib).items()
                  if name.startswith("ERR_"))


@pytest.mark.parametrize("name,status", STATUSES, ids=[n for n, _ in STATUSES])
def test_every_status_completing_a_collective_is_horovod_internal_error(name, status):
    e = _core.error(status, "from the collective", "op 'x'", completed=True)
    assert isinstance(e, hvd.HorovodInternalError) and isinstance(e, RuntimeError), (name, e)
    assert e.status == "KOLO_" + name and "from the collective" in str(e)
    assert not isinstance(e, ValueError) or name == "ERR_DUPLICATE_NAME", (name, type(e))


@pytest.mark.parametrize("name,status", STATUSES, ids=[n for n, _ in STATUSES])
def test_status_returned_by_a_call_is_value_error_only_for_local_mistakes(name, status):
    e = _core.error(status, "at submission", "op 'x'")
    local = name in ("ERR_INVALID_ARGUMENT", "ERR_NOT_INITIALIZED", "ERR_ALREADY_INITIALIZED",
                     "ERR_DUPLICATE_NAME")
    assert isinstance(e, ValueError) == local, (name, type(e))
    assert isinstance(e, hvd.HorovodInternalError) == (not local or name == "ERR_DUPLICATE_NAME")


def test_horovod_names_are_exported():
    assert issubclass(hvd.HorovodInternalError, RuntimeError)
    assert issubclass(kolo.HorovodInternalError, RuntimeError)
    assert issubclass(hvd.HostsUpdatedInterrupt, RuntimeError)
    assert hvd.HostsUpdatedInterrupt(skip_sync=True).skip_sync is True
    for cls in (hvd.MismatchError, hvd.ShutdownError, hvd.StalledError, hvd.RankFailedError,
                hvd.CollectiveRefusedError, hvd.UnsupportedError):
        assert issubclass(cls, hvd.HorovodInternalError), cls


def test_wrong_argument_types_are_type_errors(world):
    with pytest.raises(TypeError, match="torch.Tensor"):
        hvd.allreduce([1.0, 2.0])
    with pytest.raises(TypeError, match="torch.Tensor"):
        hvd.broadcast_async(3.0, 0)
    with pytest.raises(TypeError, match="name"):
        hvd.allreduce(torch.ones(2), name=7)


def test_bad_values_are_value_errors_and_start_nothing(world):
    r, n = world
    with pytest.raises(ValueError, match="dtype"):
        hvd.allreduce(torch.ones(2, dtype=torch.complex64))
    with pytest.raises(ValueError, match="op"):
        hvd.allreduce(torch.ones(2), op=99)
    with pytest.raises(ValueError):
        hvd.allreduce(torch.ones(2), op=hvd.Sum, average=True)
    with pytest.raises(ValueError, match="root"):
        hvd.broadcast(torch.ones(2), root_rank=n, name="err.badroot")
    with pytest.raises(ValueError, match="splits"):
        hvd.alltoall(torch.ones(n), splits=[1] * (n + 1))
    with pytest.raises(ValueError) as info:
        hvd.allreduce(torch.ones(2, dtype=torch.complex64))
    assert not isinstance(info.value, RuntimeError)
    # Nothing was started: the same names work now on every rank.
    assert torch.equal(hvd.broadcast(torch.full((2,), float(r)), 0, name="err.badroot"),
                       torch.zeros(2))


def test_mismatch_is_horovod_internal_error_on_every_rank(world):
    r, n = world
    dtype = torch.float64 if r == n - 1 else torch.float32
    with pytest.raises(hvd.HorovodInternalError) as info:
        hvd.allgather(torch.ones(2, dtype=dtype), name="err.mismatch")
    assert isinstance(info.value, RuntimeError) and isinstance(info.value, hvd.MismatchError)
    assert not isinstance(info.value, ValueError)


def _while_joined(kind, r, n):
    """Starts `kind` on this (not joined) rank; returns its handle."""
    x = torch.full((n, 2), float(r + 1))
    name = "err.joined.%s" % kind
    if kind == "allgather":
        return hvd.allgather_async(x, name=name)
    if kind == "broadcast":
        return hvd.broadcast_async(x, 1 if n > 1 else 0, name=name)
    if kind == "alltoall":
        return hvd.alltoall_async(x, name=name)
    return hvd.reducescatter_async(x, op=hvd.Sum, name=name)


@pytest.mark.parametrize("kind", ["allgather", "broadcast", "alltoall", "reducescatter"])
def test_collective_other_than_allreduce_while_a_rank_joined(world, kind):
    """Horovod: 'only allreduce is supported with join' - a HorovodInternalError on
    every rank that submitted it (kolo.torch raised a ValueError here)."""
    r, n = world
    for first in range(n):
        if r == first:
            hvd.join()
            continue
        with pytest.raises(hvd.HorovodInternalError) as info:
            hvd.synchronize(_while_joined(kind, r, n))
        assert isinstance(info.value, RuntimeError) and not isinstance(info.value, ValueError)
        assert isinstance(info.value, hvd.CollectiveRefusedError)
        assert "joined" in str(info.value)
        # An allreduce still works while the rank is joined (it contributes zeros).
        assert torch.equal(hvd.allreduce(torch.ones(3), op=hvd.Sum, name="err.joined.ok"),
                           torch.full((3,), float(n - 1)))
        hvd.join()
