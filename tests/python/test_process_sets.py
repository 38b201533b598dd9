"""Process sets from Python (Horovod's API: hvd.ProcessSet, add_process_set,
remove_process_set, process_set= on every op), at 4 ranks with the sets {0,2},
{1,3} and {0,1,2}; at 3 ranks {0,2}, {1,2} and the global set in place of {0,1,2}
(adding a set with the global set's ranks is refused, as in Horovod). Every rank
runs every test (collectives meet); values are chosen so that results compare
exactly."""

import numpy as np
import pytest
import torch

import kolo
import kolo.torch as hvd

RANK, SIZE = kolo.rank(), kolo.size()
pytestmark = pytest.mark.skipif(SIZE < 3, reason="process set tests need 3 or 4 ranks")


@pytest.fixture(scope="module")
def sets():
    even = hvd.add_process_set(hvd.ProcessSet([0, 2]))
    odd = hvd.add_process_set([3, 1] if SIZE == 4 else [1, 2])
    three = hvd.add_process_set([2, 1, 0]) if SIZE == 4 else hvd.global_process_set
    yield even, three, odd
    for s in (even, three, odd):
        if s is not hvd.global_process_set:
            assert hvd.remove_process_set(s)


def _members_sum(ps):
    return sum(r + 1 for r in ps.ranks)


def test_queries(sets):
    even, three, odd = sets
    assert even.process_set_id == 1 and odd.process_set_id == 2
    assert three.process_set_id == (3 if SIZE == 4 else 0)
    assert odd.ranks == [1, SIZE - 1]
    assert hvd.global_process_set.process_set_id == 0
    assert hvd.global_process_set.size() == SIZE and hvd.global_process_set.rank() == RANK
    assert even.size() == 2 and three.size() == 3
    assert even.included() == (RANK % 2 == 0)
    assert even.rank() == (RANK // 2 if RANK % 2 == 0 else -1)
    assert three.ranks == [0, 1, 2]
    with pytest.raises(ValueError, match="not registered"):
        hvd.ProcessSet([0, 1]).size()


def test_adding_bad_sets_raises_on_every_rank(sets):
    with pytest.raises(ValueError, match="ranks list different members"):
        hvd.add_process_set([0, 1] if RANK == 1 else [0, 2, 1][:2 + (RANK == 0)])
    with pytest.raises(ValueError, match="already has the ranks"):
        hvd.add_process_set([0, 2])
    with pytest.raises(ValueError, match="already has the ranks"):
        hvd.add_process_set(list(range(SIZE)))
    with pytest.raises(ValueError, match="not a rank of this job"):
        hvd.add_process_set([0, SIZE])
    with pytest.raises(ValueError, match="cannot be removed"):
        hvd.remove_process_set(hvd.global_process_set)


def test_torch_ops_in_a_set(sets):
    even, three, odd = sets
    x = torch.full((5,), float(RANK + 1))
    if not three.included():
        with pytest.raises(ValueError, match="does not include rank"):
            hvd.allreduce(x, op=hvd.Sum, name="x", process_set=three)
        return
    me = three.rank()
    assert torch.equal(hvd.allreduce(x, op=hvd.Sum, name="x", process_set=three),
                       torch.full((5,), 6.0))
    assert torch.equal(hvd.allreduce(x, name="avg", process_set=three), torch.full((5,), 2.0))
    y = x.clone()
    hvd.allreduce_(y, op=hvd.Sum, name="x_", process_set=three)
    assert torch.equal(y, torch.full((5,), 6.0))
    a, b = hvd.grouped_allreduce([x, x * 2], op=hvd.Sum, name="g", process_set=three)
    assert torch.equal(a, torch.full((5,), 6.0)) and torch.equal(b, torch.full((5,), 12.0))
    gathered = hvd.allgather(torch.full((me + 1, 2), me, dtype=torch.int32), name="ag",
                             process_set=three)
    assert gathered[:, 0].tolist() == [0, 1, 1, 2, 2, 2]
    root = hvd.broadcast(torch.tensor([RANK * 10]), root_rank=2, name="b", process_set=three)
    assert root.tolist() == [20]
    out = hvd.alltoall(torch.arange(3, dtype=torch.int64) + 10 * me, name="a2a", process_set=three)
    assert out.tolist() == [me, 10 + me, 20 + me]
    shard = hvd.reducescatter(torch.ones(3, 2), op=hvd.Sum, name="rs", process_set=three)
    assert torch.equal(shard, torch.full((1, 2), 3.0))
    hvd.barrier(process_set=three)


def test_grouped_allgather_and_reducescatter_in_a_set(sets):
    even, three, odd = sets
    if not even.included():
        with pytest.raises(ValueError, match="does not include rank"):
            hvd.grouped_allgather([torch.ones(1)], name="gag", process_set=even)
        return
    me = even.rank()  # ranks 0 and 2 are set ranks 0 and 1
    a = torch.full((me + 1, 2), float(RANK), requires_grad=True)
    b = torch.full((1,), float(-RANK), requires_grad=True)
    ga, gb = hvd.grouped_allgather([a, b], name="gag", process_set=even)
    assert ga[:, 0].tolist() == [0.0, 2.0, 2.0] and gb.tolist() == [0.0, -2.0]
    (ga.sum() + gb.sum()).backward()  # this rank's rows of the set's averaged ones
    assert torch.equal(a.grad, torch.ones_like(a)) and torch.equal(b.grad, torch.ones(1))
    base = torch.arange(6, dtype=torch.float32).reshape(3, 2)
    x = (base * (RANK + 1)).requires_grad_()
    y = (base[:2] * (RANK + 1)).requires_grad_()
    sx, sy = hvd.grouped_reducescatter([x, y], op=hvd.Sum, name="grs", process_set=even)
    full = base * 4  # (0 + 1) + (2 + 1)
    assert torch.equal(sx, full[:2] if me == 0 else full[2:])  # 3 rows over 2: 2 and 1
    assert torch.equal(sy, full[me:me + 1])
    (sx.sum() + sy.sum()).backward()  # the set's allgather of ones, times its size (Horovod)
    assert torch.equal(x.grad, torch.full((3, 2), 2.0)) and torch.equal(y.grad,
                                                                      torch.full((2, 2), 2.0))
    avg, = hvd.grouped_reducescatter([base[:2] * (RANK + 1)], name="grs.avg", process_set=even)
    assert torch.equal(avg, base[me:me + 1] * 2)  # Average divides by the set's size


def test_same_name_in_two_sets_at_once(sets):
    even, three, odd = sets
    handles = []
    for ps in (even, three, odd):
        if ps is not None and ps.included():
            t = torch.full((4,), float(RANK + 1))
            handles.append((ps, hvd.allreduce_async(t, op=hvd.Sum, name="same", process_set=ps)))
    for ps, h in handles:
        assert torch.equal(hvd.synchronize(h), torch.full((4,), float(_members_sum(ps))))


def test_numpy_ops_in_a_set(sets):
    even, _, _ = sets
    if not even.included():
        # Named: an unnamed op takes a number from the per-process counter even when
        # it is refused, and later unnamed ops would then differ between ranks.
        with pytest.raises(ValueError, match="does not include rank"):
            kolo.allreduce(np.ones(2), name="np.outside", process_set=even)
        return
    out = kolo.allreduce(np.full(3, RANK + 1, np.int64), op=kolo.Sum, name="np", process_set=even)
    assert out.tolist() == [4, 4, 4]
    g = kolo.allgather(np.array([RANK], np.int32), name="npg", process_set=even)
    assert g.tolist() == [0, 2]
    b = kolo.broadcast(np.array([RANK], np.int32), root_rank=2, name="npb", process_set=even)
    assert b.tolist() == [2]


def test_objects_and_state_in_a_set(sets):
    even, _, _ = sets
    if not even.included():
        return
    assert hvd.allgather_object({"r": RANK}, name="obj", process_set=even) == [{"r": 0}, {"r": 2}]
    assert hvd.broadcast_object("from %d" % RANK, root_rank=2, name="bo",
                                process_set=even) == "from 2"
    model = torch.nn.Linear(2, 1)
    with torch.no_grad():
        model.weight.fill_(RANK)
        model.bias.fill_(RANK)
    hvd.broadcast_parameters(model.state_dict(), root_rank=2, process_set=even)
    assert model.weight.eq(2).all() and model.bias.eq(2).all()
    opt = torch.optim.SGD(model.parameters(), lr=0.1 * (RANK + 1))
    hvd.broadcast_optimizer_state(opt, root_rank=2, process_set=even)
    assert opt.param_groups[0]["lr"] == pytest.approx(0.3)


def test_two_models_train_side_by_side(sets):
    """Ranks {0,2} train one model and the others another, each averaging its
    gradients within its own set only."""
    even, three, odd = sets
    if SIZE == 3:  # {0,2} and {1,2} overlap; the side by side case needs 4 ranks
        return
    mine = even if even.included() else odd
    model = torch.nn.Linear(1, 1, bias=False)
    with torch.no_grad():
        model.weight.fill_(1.0)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=1.0),
                                   named_parameters=model.named_parameters(), process_set=mine)
    # d(w*x)/dw = x = rank + 1; averaged over the set's members.
    model(torch.tensor([[float(RANK + 1)]])).sum().backward()
    opt.step()
    avg = _members_sum(mine) / 2.0
    assert model.weight.item() == 1.0 - avg


def test_remove_with_work_in_flight_raises_then_succeeds(sets):
    ps = hvd.add_process_set([0, 1])
    h = None
    if RANK == 0:
        h = hvd.allreduce_async(torch.ones(1), op=hvd.Sum, name="held", process_set=ps)
    with pytest.raises(ValueError, match="operations in flight on rank 0"):
        hvd.remove_process_set(ps)
    if RANK == 1:
        h = hvd.allreduce_async(torch.ones(1), op=hvd.Sum, name="held", process_set=ps)
    if h is not None:
        assert hvd.synchronize(h).tolist() == [2.0]
    assert hvd.remove_process_set(ps)
    assert ps.process_set_id is None
