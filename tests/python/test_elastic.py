"""kolo.elastic and kolo.torch.elastic without re-forming (Horovod's elastic API,
issue 31 point 2): what commit, restore and sync do to ObjectState and TorchState
(sync is a real broadcast from rank 0), check_host_updates raising on every rank
at once, run()'s loop over a Job of the test's own, ElasticSampler's split of an
epoch and its re-split after a change of size, and Horovod's elastic example
(bindings/python/examples/pytorch_synthetic_benchmark_elastic.py) as it runs
without a driver. Re-forming itself needs kolorun --elastic
(tests/kolorun/elastic_test.py)."""

import os
import runpy
import sys

import numpy as np
import pytest
import torch

import kolo
import kolo.torch as hvd
from kolo.elastic import _driver, _job, _run
from kolo.exceptions import HorovodInternalError, HostsUpdatedInterrupt
from kolo.torch.elastic import sampler as sampler_module


class FakeJob:
    """A Job whose driver says what the test wants; counts re-formings."""

    def __init__(self, elastic=True, updated=(False, 0), fail_reforms=0):
        self.elastic, self.updated, self.fail_reforms = elastic, updated, fail_reforms
        self.asked = self.reforms = 0

    def hosts_updated(self):
        self.asked += 1
        return self.updated

    def reform(self):
        self.reforms += 1
        if self.fail_reforms:
            self.fail_reforms -= 1
            raise HorovodInternalError("a peer died during the rendezvous")


@pytest.fixture
def job():
    """Installs a FakeJob as this process's Job for one test."""
    before = _job.current()
    fake = FakeJob()
    _job.use(fake)
    yield fake
    _job.use(before)


# ---- ObjectState ---------------------------------------------------------------------

def test_commit_and_restore(world):
    state = kolo.elastic.ObjectState(epoch=0, seen=[])
    state.epoch, state.seen = 3, [1]
    state.commit()
    state.epoch = 4
    state.seen.append(2)  # changed in place: restored too (Horovod kept a reference)
    state.restore()
    assert (state.epoch, state.seen) == (3, [1])


def test_sync_takes_rank_0s_state(world):
    r, n = world
    state = kolo.elastic.ObjectState(epoch=0, name="x")
    state.epoch, state.name = 10 + r, "rank%d" % r
    state.save()
    state.sync()
    assert (state.epoch, state.name) == (10, "rank0")


def test_broadcast_object_from_any_root(world):
    r, n = world
    root = n - 1
    got = kolo.elastic.broadcast_object({"from": r, "data": list(range(r + 3))}, root,
                                        name="elastic.bcast")
    assert got == {"from": root, "data": list(range(root + 3))}


def test_the_base_state_is_abstract():
    state = kolo.elastic.State()
    for method in (state.save, state.restore, state.sync):
        with pytest.raises(NotImplementedError):
            method()


def test_reset_then_callbacks_in_order():
    calls = []

    class Mine(kolo.elastic.ObjectState):
        def reset(self):
            calls.append("reset")

    state = Mine(epoch=0)
    state.register_reset_callbacks([lambda: calls.append("a"), lambda: calls.append("b")])
    state.on_reset()
    assert calls == ["reset", "a", "b"]


# ---- check_host_updates ---------------------------------------------------------------

def test_no_updates_outside_an_elastic_job(world):
    assert not _job.current().elastic  # no kolorun --elastic here
    kolo.elastic.ObjectState(epoch=0).check_host_updates()  # no broadcast, no raise


@pytest.mark.parametrize("result, skip_sync", [(_driver.UPDATE_REMOVED, True),
                                               (_driver.UPDATE_ADDED, False),
                                               (_driver.UPDATE_ADDED | _driver.UPDATE_REMOVED,
                                                False)])
def test_every_rank_raises_when_rank_0_sees_an_update(world, job, result, skip_sync):
    r, n = world
    job.updated = (True, result) if r == 0 else (False, 0)  # only rank 0 asks the driver
    state = kolo.elastic.ObjectState(epoch=0)
    with pytest.raises(HostsUpdatedInterrupt) as raised:
        state.commit()
    assert raised.value.skip_sync is skip_sync
    assert job.asked == (1 if r == 0 else 0)


def test_no_update_no_interrupt(world, job):
    kolo.elastic.ObjectState(epoch=0).commit()


# ---- run() ----------------------------------------------------------------------------

class Recording(kolo.elastic.ObjectState):
    def __init__(self):
        super().__init__(epoch=0)
        self.calls = []

    def sync(self):
        self.calls.append("sync")

    def restore(self):
        self.calls.append("restore")
        super().restore()

    def reset(self):
        self.calls.append("reset")


def scripted(*outcomes):
    """A training function that raises each of `outcomes` in turn, then returns."""
    left = list(outcomes)

    @kolo.elastic.run
    def train(state, value):
        state.calls.append("train")
        if left:
            raise left.pop(0)
        return value
    return train


def test_an_internal_error_restores_and_reforms(job):
    state = Recording()
    assert scripted(HorovodInternalError("peer died"))(state, 7) == 7
    assert state.calls == ["sync", "train", "restore", "reset", "sync", "train"]
    assert job.reforms == 1


def test_hosts_updated_keeps_the_state(job):
    state = Recording()
    train = scripted(HostsUpdatedInterrupt(skip_sync=True), HostsUpdatedInterrupt(False))
    assert train(state, 1) == 1
    assert state.calls == ["sync", "train", "reset", "train", "reset", "sync", "train"]
    assert job.reforms == 2


def test_a_failed_reform_is_tried_again(job):
    job.fail_reforms = 2
    state = Recording()
    scripted(HorovodInternalError("x"))(state, 0)
    assert job.reforms == 3


def test_other_errors_propagate(job):
    state = Recording()
    with pytest.raises(ZeroDivisionError):
        scripted(ZeroDivisionError())(state, 0)
    assert job.reforms == 0


def test_outside_an_elastic_job_nothing_reforms(job):
    job.elastic = False
    for error in (HorovodInternalError("x"), HostsUpdatedInterrupt(False)):
        state = Recording()
        with pytest.raises(type(error)):
            scripted(error)(state, 0)
        assert state.calls == ["sync", "train"]
    assert job.reforms == 0


# ---- TorchState ----------------------------------------------------------------------

def model_and_optimizer(seed):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 1))
    return model, torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)


def train_step(model, optimizer, seed):
    torch.manual_seed(seed)
    optimizer.zero_grad()
    model(torch.randn(8, 4)).pow(2).mean().backward()
    optimizer.step()


def flat(model, optimizer):
    """The model's parameters and the optimizer's momentum, as one array."""
    tensors = [p.detach().reshape(-1) for p in model.parameters()]
    tensors += [s["momentum_buffer"].reshape(-1) for s in optimizer.state.values()]
    return torch.cat(tensors).numpy().copy()


def test_torch_state_restores_the_commit_bit_for_bit(world):
    model, optimizer = model_and_optimizer(1)
    state = hvd.elastic.TorchState(model, optimizer, epoch=0)
    train_step(model, optimizer, 2)
    state.epoch = 1
    state.commit()
    committed = flat(model, optimizer)
    train_step(model, optimizer, 3)
    state.epoch = 2
    assert not np.array_equal(flat(model, optimizer), committed)
    state.restore()
    np.testing.assert_array_equal(flat(model, optimizer), committed)
    assert state.epoch == 1


def test_torch_state_sync_gives_every_rank_rank_0s(world):
    r, n = world
    model, optimizer = model_and_optimizer(100 + r)  # every rank different
    train_step(model, optimizer, 200 + r)
    state = hvd.elastic.TorchState(model, optimizer, epoch=r, batch=5 * r)
    state.sync()
    mine = flat(model, optimizer)
    every = kolo.allgather(mine[None, :], name="elastic.torch_state")
    for other in every:
        np.testing.assert_array_equal(other, every[0])
    want_model, want_opt = model_and_optimizer(100)
    train_step(want_model, want_opt, 200)
    np.testing.assert_array_equal(mine, flat(want_model, want_opt))
    assert (state.epoch, state.batch) == (0, 0)


def test_a_new_optimizer_is_saved_when_assigned(world):
    model, optimizer = model_and_optimizer(1)
    state = hvd.elastic.TorchState(model, optimizer)
    other = torch.optim.SGD(model.parameters(), lr=0.5)
    state.optimizer = other
    assert state.optimizer is other
    state.restore()
    assert other.param_groups[0]["lr"] == 0.5


# ---- ElasticSampler ------------------------------------------------------------------

class Core:
    def __init__(self, rank, size):
        self._rank, self._size = rank, size

    def rank(self):
        return self._rank

    def size(self):
        return self._size


def samplers(monkeypatch, dataset, size, **kwargs):
    """One ElasticSampler per rank of a world of `size` (made with that rank)."""
    out = []
    for r in range(size):
        monkeypatch.setattr(sampler_module, "_core", Core(r, size))
        out.append(hvd.elastic.ElasticSampler(dataset, **kwargs))
    return out


def test_an_epoch_is_split_over_the_ranks(monkeypatch):
    every = samplers(monkeypatch, list(range(10)), 3, shuffle=False)
    assert [list(s) for s in every] == [[0, 3, 6, 9], [1, 4, 7, 0], [2, 5, 8, 1]]
    assert [len(s) for s in every] == [4, 4, 4]


def test_the_rest_of_an_epoch_is_split_again_after_reforming(monkeypatch):
    data = list(range(20))
    before = samplers(monkeypatch, data, 3, seed=5)
    # Index i of the epoch's order went to rank i % 3 (7 each, one padded).
    order = [i for batch in zip(*[list(s) for s in before]) for i in batch][:20]
    assert sorted(order) == data
    for s in before:
        s.record_batch(0, 2)  # every rank did 2 samples: 6 of the epoch
    saved = before[0].state_dict()
    assert saved == {"epoch": 0, "processed_num": 6}
    after = samplers(monkeypatch, data, 2, seed=5)
    for r, s in enumerate(after):
        monkeypatch.setattr(sampler_module, "_core", Core(r, 2))
        s.load_state_dict(saved)
    assert [len(s) for s in after] == [7, 7]
    rest = [i for s in after for i in s]
    assert sorted(rest) == sorted(order[6:])  # 14 left, 7 each: nothing twice, none lost


def test_set_epoch_starts_over_in_another_order(monkeypatch):
    s = samplers(monkeypatch, list(range(50)), 1, seed=3)[0]
    s.record_batch(0, 10)
    first = list(s)
    s.set_epoch(1)
    assert s.state_dict() == {"epoch": 1, "processed_num": 0}
    assert len(list(s)) == 50 and list(s) != first


def test_torch_state_syncs_a_sampler(world):
    r, n = world
    model, optimizer = model_and_optimizer(1)
    s = hvd.elastic.ElasticSampler(list(range(30)))
    s.record_batch(0, r + 1)  # ranks disagree until the sync
    state = hvd.elastic.TorchState(model, optimizer, sampler=s)
    state.sync()
    assert s.state_dict() == {"epoch": 0, "processed_num": n}


# ---- Horovod's elastic example -------------------------------------------------------

def test_horovods_elastic_example(world, monkeypatch):
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bindings",
                        "python", "examples", "pytorch_synthetic_benchmark_elastic.py")
    monkeypatch.setattr(sys, "argv", [path, "--num-iters", "2", "--num-warmup-batches", "1",
                                      "--num-batches-per-iter", "2", "--batch-size", "4"])
    ns = runpy.run_path(path, run_name="__main__")
    state = ns["state"]
    assert (state.iter, len(state.img_secs), state.warm, state.batch) == (1, 2, True, 0)
    params = torch.cat([p.detach().reshape(-1) for p in ns["model"].parameters()]).numpy()
    every = kolo.allgather(params[None, :], name="elastic.example")
    for other in every:
        np.testing.assert_array_equal(other, every[0])


def test_a_sampler_is_split_again_on_reset(world, monkeypatch):
    model, optimizer = model_and_optimizer(1)
    s = hvd.elastic.ElasticSampler(list(range(12)), shuffle=False)
    state = hvd.elastic.TorchState(model, optimizer, sampler=s)
    monkeypatch.setattr(sampler_module, "_core", Core(0, 4))  # the world re-formed at 4
    state.on_reset()
    assert (s.num_replicas, len(s), list(s)) == (4, 3, [0, 4, 8])
