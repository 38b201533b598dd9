"""Backend "kolo" for torch.distributed (issue 30): every c10d collective on CPU
tensors, each checked against the expected values and against gloo on the same
inputs; async work whose future completes; errors as RuntimeError on every rank
naming the op and the shapes; new_group on kolo process sets."""

import pytest
import torch
import torch.distributed as dist

import c10d_setup

R = dist.ReduceOp


@pytest.fixture(scope="module")
def pgs():
    kolo_pg, gloo_pg = c10d_setup.groups()
    assert dist.get_backend() == "kolo" and kolo_pg.getBackendName() == "kolo"
    return kolo_pg, gloo_pg


def both(pgs, fn):
    """fn(group) on the kolo group and on gloo; returns (kolo's, gloo's)."""
    return fn(None), fn(pgs[1])


def rank_tensor(dtype=torch.float32, shape=(2, 3), scale=1):
    r = dist.get_rank()
    return ((torch.arange(6, dtype=torch.float64).reshape(shape) % 4 + r + 1) * scale).to(dtype)


@pytest.mark.parametrize("op", [R.SUM, R.AVG, R.PRODUCT, R.MIN, R.MAX],
                         ids=["sum", "avg", "product", "min", "max"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int32],
                         ids=["f32", "f64", "i32"])
def test_all_reduce_matches_gloo(pgs, op, dtype):
    if op == R.AVG and dtype == torch.int32:
        pytest.skip("gloo has no AVG")
    if op == R.AVG:  # gloo has no AVG: SUM / size
        k = rank_tensor(dtype)
        dist.all_reduce(k, op=op)
        g = rank_tensor(dtype)
        dist.all_reduce(g, group=pgs[1])
        assert torch.allclose(k, g / dist.get_world_size())
        return
    k, g = both(pgs, lambda grp: _all_reduce(rank_tensor(dtype), op, grp))
    assert torch.equal(k, g)


def _all_reduce(t, op, group):
    dist.all_reduce(t, op=op, group=group)
    return t


@pytest.mark.parametrize("op", [R.BAND, R.BOR, R.BXOR], ids=["band", "bor", "bxor"])
def test_bitwise_all_reduce_matches_gloo(pgs, op):
    k, g = both(pgs, lambda grp: _all_reduce(rank_tensor(torch.int64) * 5 + 3, op, grp))
    assert torch.equal(k, g)


def test_premul_sum_and_float_bitwise_are_refused(pgs):
    with pytest.raises(RuntimeError, match="PREMUL_SUM"):
        dist.all_reduce(torch.ones(2), op=dist._make_nccl_premul_sum(2.0))
    with pytest.raises(RuntimeError, match="BAND takes integer"):
        dist.all_reduce(torch.ones(2), op=R.BAND)


def test_non_contiguous_all_reduce_and_coalesced(pgs):
    n = dist.get_world_size()
    t = torch.ones(4, 3)[:, 1]  # a strided view
    dist.all_reduce(t)
    assert torch.equal(t, torch.full((4,), float(n)))
    ts = [torch.ones(2), torch.full((3,), 2.0)]
    dist.all_reduce_coalesced(ts)
    assert torch.equal(ts[0], torch.full((2,), float(n))) and torch.equal(ts[1],
                                                                          torch.full((3,), 2.0 * n))


def test_broadcast_from_every_root(pgs):
    for root in range(dist.get_world_size()):
        k, g = both(pgs, lambda grp: _bcast(rank_tensor(), root, grp))
        assert torch.equal(k, g) and torch.equal(k, rank_tensor() - dist.get_rank() + root)


def _bcast(t, root, group):
    dist.broadcast(t, root, group=group)
    return t


def test_all_gather_and_into_tensor(pgs):
    n = dist.get_world_size()

    def gather(grp):
        outs = [torch.zeros(2, 3) for _ in range(n)]
        dist.all_gather(outs, rank_tensor(), group=grp)
        return torch.stack(outs)
    k, g = both(pgs, gather)
    assert torch.equal(k, g)
    out = torch.zeros(2 * n, 3)
    dist.all_gather_into_tensor(out, rank_tensor())
    assert torch.equal(out, k.reshape(2 * n, 3))
    outs = [[torch.zeros(2), torch.zeros(1, 3)] for _ in range(n)]
    dist.all_gather_coalesced(outs, [torch.full((2,), float(dist.get_rank())),
                                     torch.full((1, 3), -1.0 * dist.get_rank())])
    for r in range(n):
        assert torch.equal(outs[r][0], torch.full((2,), float(r)))
        assert torch.equal(outs[r][1], torch.full((1, 3), -1.0 * r))


def test_all_gather_into_outputs_of_every_kind(pgs):
    """all_gather copies each rank's row straight from kolo's output into the
    caller's tensors: strided ones, big ones (kolo memory), none at all, another
    dtype (which torch.distributed refuses; the process group called directly
    converts); outputs of the wrong size are an error. all_to_all likewise."""
    n = dist.get_world_size()
    big = torch.zeros(3, 2 * n)
    strided = [big[:, 2 * r] for r in range(n)]  # columns of a row-major tensor
    dist.all_gather(strided, torch.full((3,), 1.0 + dist.get_rank()))
    for r in range(n):
        assert torch.equal(big[:, 2 * r], torch.full((3,), 1.0 + r))
        assert torch.equal(big[:, 2 * r + 1], torch.zeros(3))
    rows = 5 << 20  # 20 MiB a rank of float32: kolo's output from kolo memory
    outs = [torch.empty(rows) for _ in range(n)]
    dist.all_gather(outs, torch.arange(rows, dtype=torch.float32) + dist.get_rank())
    for r in range(n):
        assert outs[r][0].item() == r and outs[r][-1].item() == rows - 1 + r
    wide = [torch.zeros(2, 3, dtype=torch.float64) for _ in range(n)]
    pgs[0].allgather([wide], [rank_tensor()]).wait()
    k, g = both(pgs, lambda grp: _gather_into([torch.zeros(2, 3) for _ in range(n)], grp))
    assert torch.equal(torch.stack(wide), g.double())
    empty = [torch.empty(0) for _ in range(n)]
    dist.all_gather(empty, torch.empty(0))
    wrong = [torch.zeros(7) for _ in range(n)]
    with pytest.raises(RuntimeError, match="all_gather"):
        dist.all_gather(wrong, torch.zeros(6))
    r = dist.get_rank()
    big_in = torch.arange(rows * n, dtype=torch.float32) + 1000 * r
    big_out = torch.empty(rows * n)
    dist.all_to_all_single(big_out, big_in)
    for q in range(n):
        got = big_out[q * rows:(q + 1) * rows]
        assert got[0].item() == r * rows + 1000 * q and got[-1].item() == (r + 1) * rows - 1 + 1000 * q
    cols = torch.zeros(2, n)
    dist.all_to_all([cols[:, q] for q in range(n)],
                    [torch.full((2,), float(10 * r + q)) for q in range(n)])
    assert torch.equal(cols, torch.tensor([[10.0 * q + r for q in range(n)]] * 2))


def _gather_into(outs, group):
    dist.all_gather(outs, rank_tensor(), group=group)
    return torch.stack(outs)


@pytest.mark.parametrize("op", [R.SUM, R.MAX, R.PRODUCT, R.BOR], ids=["sum", "max", "product", "bor"])
def test_reduce_scatter_matches_gloo(pgs, op):
    n = dist.get_world_size()
    dtype = torch.int64 if op == R.BOR else torch.float32

    inputs = [rank_tensor(dtype, scale=i + 1) for i in range(n)]
    k = torch.zeros(2, 3, dtype=dtype)
    dist.reduce_scatter(k, inputs, op=op)
    g = torch.stack(inputs)  # gloo has no reduce_scatter: its all_reduce, this rank's part
    dist.all_reduce(g, op=op, group=pgs[1])
    assert torch.equal(k, g[dist.get_rank()])
    out = torch.zeros(2, 3, dtype=dtype)
    dist.reduce_scatter_tensor(out, torch.cat([rank_tensor(dtype, scale=i + 1) for i in range(n)]),
                               op=op)
    assert torch.equal(out, k)


def test_reduce_scatter_average(pgs):
    n = dist.get_world_size()
    out = torch.zeros(3)
    dist.reduce_scatter(out, [torch.full((3,), float(dist.get_rank() + i)) for i in range(n)],
                        op=R.AVG)
    r = dist.get_rank()
    assert torch.allclose(out, torch.full((3,), sum(q + r for q in range(n)) / n))


def test_all_to_all_single_with_splits_and_lists(pgs):
    n, r = dist.get_world_size(), dist.get_rank()
    # Rank r sends d + 1 rows to rank d and receives r + 1 rows from every rank.
    send = [d + 1 for d in range(n)]
    recv = [r + 1] * n
    inp = torch.cat([torch.full((d + 1, 2), float(10 * r + d)) for d in range(n)])

    def a2a(grp):
        out = torch.zeros(sum(recv), 2)
        dist.all_to_all_single(out, inp, recv, send, group=grp)
        return out
    k, g = both(pgs, a2a)
    assert torch.equal(k, g)
    even_in = torch.arange(2.0 * n) + 100 * r
    out = torch.zeros(2 * n)
    dist.all_to_all_single(out, even_in)
    assert torch.equal(out, torch.cat([torch.arange(2.0 * r, 2.0 * r + 2) + 100 * q
                                       for q in range(n)]))
    outs = [torch.zeros(q + 1) for q in range(n)]
    dist.all_to_all(outs, [torch.full((r + 1,), float(r * n + d)) for d in range(n)])
    assert all(torch.equal(outs[q], torch.full((q + 1,), float(q * n + r))) for q in range(n))


def test_reduce_gather_scatter_at_every_root(pgs):
    n, r = dist.get_world_size(), dist.get_rank()
    for root in range(n):
        t = torch.full((2,), float(r + 1))
        dist.reduce(t, root)
        want = float(sum(range(1, n + 1))) if r == root else float(r + 1)
        assert torch.equal(t, torch.full((2,), want))
        got = [torch.zeros(2) for _ in range(n)] if r == root else None
        dist.gather(torch.full((2,), float(r)), got, dst=root)
        if r == root:
            assert all(torch.equal(got[q], torch.full((2,), float(q))) for q in range(n))
        out = torch.zeros(2)
        dist.scatter(out, [torch.full((2,), float(q + root)) for q in range(n)] if r == root
                     else None, src=root)
        assert torch.equal(out, torch.full((2,), float(r + root)))


def test_async_work_future_completes_on_kolo_completion(pgs):
    n = dist.get_world_size()
    t = torch.ones(5)
    work = dist.all_reduce(t, async_op=True)
    chained = work.get_future().then(lambda fut: fut.value()[0] * 2)
    assert torch.equal(chained.wait(), torch.full((5,), 2.0 * n))
    assert work.wait() and work.is_completed() and work.is_success()
    dist.barrier()
    assert dist.barrier(async_op=True).wait()


def test_a_waiting_caller_completes_its_own_operation(pgs):
    """Note [A waiting caller completes its own operation]: wait() on a Work that
    is not complete yet completes it on the caller's thread (callbacks chained on
    its future run there), also when a callback waits for a later collective; a
    Work completed already is waited for as before. Rank 0 starts late, so every
    other rank's operation is still pending when it waits."""
    import threading
    import time
    n, r = dist.get_world_size(), dist.get_rank()
    if r == 0:
        time.sleep(0.3)
    t = torch.ones(3)
    work = dist.all_reduce(t, async_op=True)
    where = work.get_future().then(lambda fut: threading.get_ident())

    def later(fut):  # a collective inside a callback (PowerSGD's hooks do this)
        u = torch.ones(2)
        dist.all_reduce(u)
        return u
    chained = work.get_future().then(later)
    assert work.wait()
    assert torch.equal(t, torch.full((3,), float(n)))
    assert torch.equal(chained.wait(), torch.full((2,), float(n)))
    if r != 0:
        assert where.wait() == threading.get_ident()
    dist.barrier()
    done = dist.all_reduce(torch.ones(1), async_op=True)
    done.get_future().wait()
    assert done.wait() and done.is_completed()


def test_objects_over_kolo(pgs):
    n, r = dist.get_world_size(), dist.get_rank()
    objs = [None] * n
    dist.all_gather_object(objs, {"rank": r})
    assert objs == [{"rank": q} for q in range(n)]
    box = [r * 7 if r == n - 1 else None]
    dist.broadcast_object_list(box, src=n - 1)
    assert box == [(n - 1) * 7]


def test_a_shape_mismatch_is_an_error_on_every_rank(pgs):
    r = dist.get_rank()
    with pytest.raises(RuntimeError) as caught:
        dist.all_reduce(torch.ones(2 + r))
    text = str(caught.value)
    assert "all_reduce of float32[%d]" % (2 + r) in text and "MISMATCH" in text
    assert "[2] on rank 0" in text and "[3] on rank 1" in text


def test_a_different_collective_at_the_same_position_is_an_error_on_every_rank(pgs):
    r = dist.get_rank()
    t = torch.ones(4)
    with pytest.raises(RuntimeError) as caught:
        if r == 0:
            dist.broadcast(t, 0)
        else:
            dist.all_reduce(t)
    text = str(caught.value)
    assert ("broadcast of float32[4]" if r == 0 else "all_reduce of float32[4]") in text
    assert "disagree on collective" in text
    work = None
    if r == 0:
        work = dist.all_reduce(torch.ones(3), async_op=True)
    else:
        work = dist.all_gather_into_tensor(torch.zeros(3 * dist.get_world_size()), torch.ones(3),
                                           async_op=True)
    with pytest.raises(RuntimeError, match="disagree on collective"):
        work.wait()
    dist.barrier()  # the group goes on: the failed calls used one position each


def test_send_and_recv_over_pair_sets(pgs):
    """As the suite's test_send_recv: rank src sends to every other rank in turn;
    then isend/irecv with tags, and sizes that differ as an error on both ends."""
    n, r = dist.get_world_size(), dist.get_rank()
    for src in range(n):
        if src == r:
            for dst in range(n):
                if dst != r:
                    dist.send(torch.full((src + 1, 2), float(src)), dst)
        else:
            got = torch.zeros(src + 1, 2)
            dist.recv(got, src)
            assert torch.equal(got, torch.full((src + 1, 2), float(src)))
    peer = (r + 1) % n
    left = (r - 1) % n
    if n == 2 and r == 1:  # the same pair both ways: receive first, then send
        got = [torch.zeros(3), torch.zeros(3)]
        works = [dist.irecv(got[k], left, tag=k) for k in (1, 0)]
        works += [dist.isend(torch.full((3,), 10.0 * r + k), peer, tag=k) for k in (0, 1)]
    else:
        works = [dist.isend(torch.full((3,), 10.0 * r + k), peer, tag=k) for k in (0, 1)]
        got = [torch.zeros(3), torch.zeros(3)]
        works += [dist.irecv(got[k], left, tag=k) for k in (1, 0)]
    for w in works:
        w.wait()
    assert [g.tolist() for g in got] == [[10.0 * left + k] * 3 for k in (0, 1)]
    with pytest.raises(RuntimeError, match="any source"):
        dist.recv(torch.zeros(1))
    if r < 2:
        with pytest.raises(RuntimeError, match="disagree on shape"):
            if r == 0:
                dist.send(torch.ones(2), 1, tag=9)
            else:
                dist.recv(torch.zeros(3), 0, tag=9)


def test_new_group_runs_on_a_kolo_process_set(pgs):
    n, r = dist.get_world_size(), dist.get_rank()
    members = list(range(0, n, 2))  # {0} at 2 ranks, {0, 2} at 3
    sub = dist.new_group(members)
    whole = dist.new_group(list(range(n)))  # the world's ranks: the global set, a new serial
    if r in members:
        t = torch.full((2,), float(r + 1))
        dist.all_reduce(t, group=sub)
        assert torch.equal(t, torch.full((2,), float(sum(q + 1 for q in members))))
        t = torch.full((1,), float(r))
        dist.broadcast(t, members[-1], group=sub)  # root: a global rank
        assert torch.equal(t, torch.full((1,), float(members[-1])))
    else:
        assert sub == dist.GroupMember.NON_GROUP_MEMBER
    t = torch.ones(3)
    dist.all_reduce(t, group=whole)
    assert torch.equal(t, torch.full((3,), float(n)))


@pytest.mark.parametrize("env, mpi", [
    ({}, False),                                          # torchrun, mp.spawn: socket world
    ({"PMI_RANK": "0"}, True),                            # mpiexec (MPICH's hydra)
    ({"OMPI_COMM_WORLD_RANK": "1"}, True),                # Open MPI's mpirun
    ({"PMI_RANK": "0", "KOLO_WORLD": "socket"}, False),   # KOLO_WORLD decides
    ({"KOLO_WORLD": "mpi"}, True),
])
def test_which_world_the_default_group_starts(env, mpi):
    from kolo.torch.distributed import _world
    assert _world.wants_mpi(env) is mpi
