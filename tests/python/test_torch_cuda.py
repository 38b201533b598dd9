"""kolo.torch with CUDA tensors: the NCCL transport behind Horovod's names. Skipped
where torch has no CUDA device or libkolo has no NCCL (CI); NCCL needs a GPU per
rank, so at n ranks this needs n visible devices. Values are chosen so every sum is
exact and results compare with ==."""

import pytest

torch = pytest.importorskip(
    "torch", reason="python3-torch is not installed (tools/setup-deps.sh installs it)")

import kolo.torch as hvd  # noqa: E402

if not torch.cuda.is_available():
    pytest.skip("torch sees no CUDA device", allow_module_level=True)
if not hvd.nccl_built():
    pytest.skip("this libkolo has no NCCL transport", allow_module_level=True)
if torch.cuda.device_count() < hvd.local_size():
    pytest.skip("needs a GPU per rank: %d ranks on this node, %d devices" % (
        hvd.local_size(), torch.cuda.device_count()), allow_module_level=True)

DEVICE = torch.device("cuda", hvd.local_rank())
torch.cuda.set_device(DEVICE)
DTYPES = [torch.uint8, torch.int8, torch.int32, torch.int64, torch.float16, torch.bfloat16,
          torch.float32, torch.float64]


def ranks_sum(n):
    return n * (n + 1) // 2


@pytest.mark.parametrize("dtype", DTYPES)
def test_allreduce_sum_and_average(dtype):
    r, n = hvd.rank(), hvd.size()
    x = torch.full((1001,), r + 1, dtype=dtype, device=DEVICE)
    total = hvd.allreduce(x, op=hvd.Sum, name="sum.%s" % dtype)
    assert total.device == DEVICE
    assert torch.equal(total.cpu(), torch.full((1001,), ranks_sum(n), dtype=dtype))
    even = torch.full((7,), 2 * (r + 1), dtype=dtype, device=DEVICE)
    mean = hvd.allreduce(even, op=hvd.Average, name="avg.%s" % dtype)
    assert torch.equal(mean.cpu(), torch.full((7,), ranks_sum(n) * 2 // n, dtype=dtype))


def test_in_place_scaled_and_produced_on_the_current_stream():
    r, n = hvd.rank(), hvd.size()
    stream = torch.cuda.Stream(device=DEVICE)
    with torch.cuda.stream(stream):
        x = torch.zeros(1 << 20, device=DEVICE)
        x.add_(r + 1)  # queued on `stream`, which kolo is handed as the producer
        hvd.allreduce_(x, op=hvd.Sum, prescale_factor=2.0, postscale_factor=0.25,
                       name="inplace")
    stream.synchronize()
    assert torch.equal(x.cpu(), torch.full((1 << 20,), ranks_sum(n) * 0.5))


def test_many_small_tensors_fuse_and_grouped():
    r, n = hvd.rank(), hvd.size()
    handles = [hvd.allreduce_async(torch.full((i + 1,), float(r + i), device=DEVICE),
                                   op=hvd.Sum, name="small.%d" % i) for i in range(64)]
    for i, h in enumerate(handles):
        expected = sum(float(k + i) for k in range(n))
        assert torch.equal(hvd.synchronize(h).cpu(), torch.full((i + 1,), expected))
    group = [torch.full((5 * (i + 1),), float(r), device=DEVICE) for i in range(4)]
    out = hvd.grouped_allreduce(group, op=hvd.Sum, name="group")
    for i, t in enumerate(out):
        assert torch.equal(t.cpu(), torch.full((5 * (i + 1),), float(sum(range(n)))))


def test_broadcast_allgather_alltoall_reducescatter():
    r, n = hvd.rank(), hvd.size()
    b = torch.full((9,), float(r), device=DEVICE)
    assert torch.equal(hvd.broadcast(b, root_rank=n - 1, name="bcast").cpu(),
                       torch.full((9,), float(n - 1)))

    mine = torch.full((r + 1, 3), r, dtype=torch.int32, device=DEVICE)
    gathered = hvd.allgather(mine, name="gather")
    assert gathered.device == DEVICE
    expected = torch.cat([torch.full((k + 1, 3), k, dtype=torch.int32) for k in range(n)])
    assert torch.equal(gathered.cpu(), expected)

    rows = torch.arange(2 * n, dtype=torch.float32, device=DEVICE) + 100 * r
    received = hvd.alltoall(rows, name="a2a")
    assert received.device == DEVICE
    expected = torch.cat([torch.arange(2 * r, 2 * r + 2, dtype=torch.float32) + 100 * k
                          for k in range(n)])
    assert torch.equal(received.cpu(), expected)

    full = torch.full((4 * n, 2), float(r + 1), device=DEVICE)
    shard = hvd.reducescatter(full, op=hvd.Sum, name="rs")
    assert torch.equal(shard.cpu(), torch.full((4, 2), float(ranks_sum(n))))


def test_unsupported_dtype_fails_clearly():
    with pytest.raises(hvd.UnsupportedError, match="int16"):
        hvd.allreduce(torch.ones(3, dtype=torch.int16, device=DEVICE), name="i16")
