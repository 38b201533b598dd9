"""Horovod behaviours (issue 30, point 5), each written the way a Horovod program
uses it; the Horovod test each mirrors is named (test/parallel/test_torch.py)."""

import pytest
import torch

import kolo.torch as hvd


def random_sparse(rows, cols, seed):
    g = torch.Generator().manual_seed(seed)
    t = torch.rand(rows, cols, generator=g)
    t[t < 0.8] = 0
    return t.to_sparse()


def test_sparse_allreduce_async_returns_a_handle_you_call(world):
    """test_async_sparse_allreduce: handle() is the reduced sparse tensor."""
    r, n = world
    sizes = [17, 32, 81, 12]
    tensors = [random_sparse(d0, 10, 100 * r + i) for i, d0 in enumerate(sizes)]
    dense = [hvd.allreduce(t.to_dense(), name="hb.dense.%d" % i) for i, t in enumerate(tensors)]
    handles = [hvd.sparse_allreduce_async(t, op=hvd.Average, name=str(i))
               for i, t in enumerate(tensors)]
    assert all(callable(h) for h in handles)
    for h, want in zip(handles, dense):
        got = h()
        assert got.is_sparse
        assert torch.allclose(got.to_dense(), want)
    # Horovod's positional order: (tensor, name, op, process_set).
    h = hvd.sparse_allreduce_async(tensors[0], "hb.positional", hvd.Sum, hvd.global_process_set)
    assert torch.allclose(h().to_dense(), dense[0] * n)


@pytest.mark.parametrize("op,per_element", [(hvd.Sum, "size"), (hvd.Average, 1)],
                         ids=["sum", "average"])
@pytest.mark.parametrize("dim", [1, 2, 3])
def test_reducescatter_gradient_of_ones(world, op, per_element, dim):
    """test_horovod_reducescatter_grad (Sum: size per element) and
    test_horovod_reducescatter_grad_average (Average: 1)."""
    r, n = world
    for dtype in (torch.float32, torch.float64, torch.float16):
        torch.manual_seed(1234)
        tensor = torch.FloatTensor(*([n * 4] * dim)).random_(-100, 100).to(dtype)
        tensor.requires_grad_()
        summed = hvd.reducescatter(tensor, op=op)
        summed.backward(torch.ones([4] + [n * 4] * (dim - 1), dtype=dtype))
        expected = torch.full([n * 4] * dim, float(n if per_element == "size" else 1))
        assert torch.equal(tensor.grad.float(), expected), (op, dtype)


def test_reducescatter_adasum_raises_runtime_error(world):
    """test_horovod_reducescatter_adasum: RuntimeError (HorovodInternalError), never a
    ValueError, for every dtype and shape."""
    n = hvd.size()
    for dtype in (torch.int32, torch.int64, torch.float32, torch.float64, torch.float16):
        for dim in (1, 2, 3):
            tensor = torch.FloatTensor(*([n * 4] * dim)).random_(-100, 100).to(dtype)
            with pytest.raises(RuntimeError) as caught:
                hvd.reducescatter(tensor, op=hvd.Adasum)
            assert not isinstance(caught.value, ValueError)
            assert "Adasum" in str(caught.value)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = torch.nn.Embedding(10, 3, sparse=True)

    def forward(self, x):
        return self.embedding(x)


class RecordingSparseAdam(torch.optim.SparseAdam):
    """SparseAdam that records whether each step saw sparse gradients."""

    seen = []

    def step(self, closure=None):
        RecordingSparseAdam.seen.append([p.grad.is_sparse for g in self.param_groups
                                         for p in g["params"] if p.grad is not None])
        return super().step(closure)


@pytest.mark.parametrize("sparse_as_dense", [False, True], ids=["sparse", "sparse_as_dense"])
def test_sparse_embeddings_with_sparse_adam(world, sparse_as_dense):
    """test_sparse_embeddings: SparseAdam under DistributedOptimizer. The wrapped
    optimizer gets a sparse gradient either way: sparse_as_dense=True reduces it
    densely and makes it sparse again before the update (Horovod's docs: "convert
    all sparse gradients to dense and perform allreduce, then convert back to sparse
    before applying the update"); every rank ends with the same embedding."""
    r, n = world
    torch.manual_seed(5)
    model = Net()
    if r == 0:
        inp = torch.LongTensor([[1, 2, 4, 5], [4, 3, 2, 9]])
    else:
        inp = torch.LongTensor([[1, 3, 4], [4, 7, 9]])
    RecordingSparseAdam.seen = []
    opt = RecordingSparseAdam(list(model.parameters()), lr=0.1)
    opt = hvd.DistributedOptimizer(opt, sparse_as_dense=sparse_as_dense)
    for _ in range(2):
        loss = model(inp).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert RecordingSparseAdam.seen == [[True], [True]]
    assert model.embedding.weight.grad.is_sparse
    weights = hvd.allgather(model.embedding.weight.detach().unsqueeze(0),
                            name="hb.emb.%s" % sparse_as_dense)
    for q in range(n):
        assert torch.equal(weights[q], weights[0])
