"""Sparse (COO) tensors in allreduce and DistributedOptimizer, as Horovod has them
(issue 14 item 5): indices and values are allgathered, Average divides the values by
the number of ranks; a model with nn.Embedding(sparse=True) trains, sparse or with
sparse_as_dense=True, to the same parameters as one process on the whole batch."""

import copy

import pytest
import torch

import kolo.torch as hvd


def rank_sparse(r, dtype=torch.float64, scale=1):
    """Rank r's hybrid COO tensor [6, 3]: rows r and r+2 (rank 0 has none at all
    when there are 3 ranks, so some rank contributes no entries), values r+1."""
    if r == 0 and hvd.size() > 2:
        return torch.sparse_coo_tensor(torch.zeros(1, 0, dtype=torch.int64),
                                       torch.zeros(0, 3, dtype=dtype), (6, 3))
    rows = torch.tensor([[r, r + 2]])
    return torch.sparse_coo_tensor(rows, torch.full((2, 3), (r + 1) * scale).to(dtype), (6, 3))


def dense_sum(n, dtype=torch.float64):
    return sum(rank_sparse(q, dtype).to_dense() for q in range(n))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64], ids=str)
def test_sparse_allreduce_sum_and_average(world, dtype):
    r, n = world
    x = rank_sparse(r, dtype)
    y = hvd.allreduce(x, op=hvd.Sum, name="sp.sum.%s" % dtype)
    assert y.is_sparse and y.dtype == dtype and y.shape == x.shape
    assert torch.equal(y.to_dense(), dense_sum(n, dtype))
    avg = hvd.allreduce(x, op=hvd.Average, name="sp.avg.%s" % dtype).to_dense()
    if dtype.is_floating_point:
        assert torch.allclose(avg, dense_sum(n, dtype) / n, rtol=0, atol=1e-6)
    else:  # rounded toward zero, as the dense integer average (and Horovod's) is
        assert torch.equal(avg, torch.div(dense_sum(n, dtype), n, rounding_mode="trunc"))
        neg = rank_sparse(r, dtype, scale=-1)
        got = hvd.allreduce(neg, op=hvd.Average, name="sp.neg.%s" % dtype).to_dense()
        dense = hvd.allreduce(neg.to_dense(), op=hvd.Average, name="sp.dense.%s" % dtype)
        assert torch.equal(got, dense)
        assert torch.equal(got, torch.div(-dense_sum(n, dtype), n, rounding_mode="trunc"))
    # the unnamed default op is Average, as Horovod's
    if dtype == torch.float64:
        assert torch.equal(hvd.allreduce(x).to_dense(), dense_sum(n) / n)


def test_sparse_allreduce_async_poll_and_synchronize(world):
    r, n = world
    handles = [hvd.allreduce_async(rank_sparse(r, scale=k + 1), op=hvd.Sum, name="sp.async.%d" % k)
               for k in range(3)]
    for k, h in enumerate(handles):
        while not hvd.poll(h):
            pass
        assert torch.equal(hvd.synchronize(h).to_dense(), dense_sum(n) * (k + 1))
    h = hvd.sparse_allreduce_async(rank_sparse(r), name="sp.horovod_name", op=hvd.Sum)
    assert torch.equal(hvd.synchronize(h).to_dense(), dense_sum(n))


def test_sparse_allreduce_of_a_fully_sparse_tensor_and_factors(world):
    r, n = world
    x = torch.sparse_coo_tensor(torch.tensor([[r, 0], [1, r]]), torch.tensor([1.0, 2.0]),
                                (n, n))
    want = sum(torch.sparse_coo_tensor(torch.tensor([[q, 0], [1, q]]), torch.tensor([1.0, 2.0]),
                                       (n, n)).to_dense() for q in range(n))
    got = hvd.allreduce(x, op=hvd.Sum, prescale_factor=2.0, postscale_factor=0.5, name="sp.full")
    assert torch.equal(got.to_dense(), want)
    assert torch.equal(got.coalesce().to_dense(), want)


def test_sparse_bad_arguments_are_value_errors(world):
    x = rank_sparse(hvd.rank())
    with pytest.raises(ValueError, match="Sum or Average"):
        hvd.allreduce(x, op=hvd.Max)
    with pytest.raises(ValueError, match="COO"):
        hvd.allreduce(torch.eye(3).to_sparse_csr())
    with pytest.raises(ValueError, match="sparse"):
        hvd.allreduce_(x)
    with pytest.raises(ValueError, match="sparse"):
        hvd.grouped_allreduce([x])


class EmbeddingModel(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(12, 4, sparse=True)
        self.out = torch.nn.Linear(4, 1)

    def forward(self, ids):
        return self.out(self.emb(ids).mean(dim=1)).squeeze(1)


def batch(r, step):
    """Rank r's batch for `step`: 3 samples of 5 token ids (overlapping ranks)."""
    g = torch.Generator().manual_seed(1000 * step + r)
    ids = torch.randint(0, 12, (3, 5), generator=g)
    return ids, torch.randn(3, generator=g, dtype=torch.float64)


def train(model, opt, batches):
    for ids, target in batches:
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(ids), target).backward()
        opt.step()


@pytest.mark.parametrize("sparse_as_dense", [False, True], ids=["sparse", "sparse_as_dense"])
def test_embedding_sparse_trains_like_one_process_on_the_whole_batch(world, sparse_as_dense):
    r, n = world
    torch.manual_seed(7)
    reference = EmbeddingModel().double()
    model = copy.deepcopy(reference)
    initial = reference.emb.weight.detach().clone()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.5),
                                   named_parameters=model.named_parameters(),
                                   sparse_as_dense=sparse_as_dense)
    steps = 4
    train(model, opt, [batch(r, s) for s in range(steps)])
    assert model.emb.weight.grad.is_sparse  # sparse_as_dense: made sparse again, as Horovod
    # The mean loss over the n equal batches has the average of the ranks' gradients.
    whole = [tuple(torch.cat(parts) for parts in zip(*[batch(q, s) for q in range(n)]))
             for s in range(steps)]
    train(reference, torch.optim.SGD(reference.parameters(), lr=0.5), whole)
    for (name, p), q in zip(model.named_parameters(), reference.parameters()):
        assert torch.allclose(p, q, rtol=0, atol=1e-12), name
    assert not torch.equal(model.emb.weight, initial)
