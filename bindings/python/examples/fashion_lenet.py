#!/usr/bin/python3
"""LeNet on Fashion-MNIST-shaped data, trained data-parallel with kolo.torch.

    mpiexec.mpich -n 2 /usr/bin/python3 bindings/python/examples/fashion_lenet.py

The model and the training loop are d2l's LeNet chapter (LeNet-5, SGD, cross-entropy;
d2l's sigmoid with lr 0.9 is --activation sigmoid --lr 0.9, but it needs far more steps
than this small data set gives, so the default is ReLU with lr 0.1), made data-parallel the Horovod way: each rank
trains on its shard of every global batch, DistributedOptimizer averages the
gradients, rank 0's initial parameters are broadcast to all. Nothing can be
downloaded here, so the data are generated: 28x28 grey images of 10 classes, each
class a fixed random pattern of strokes plus per-image noise and shifts, the same on
every rank (seeded). It prints per-epoch loss, train and test accuracy and seconds
per epoch, and at the end checks that every rank holds bit-identical parameters.
"""

import argparse
import os
import sys
import time

import torch
from torch import nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import kolo.torch as hvd  # noqa: E402  (the only change from a horovod.torch script)

IMAGE = 28
CLASSES = 10


def lenet(activation=nn.Sigmoid):
    """d2l's LeNet-5: two conv + average-pool stages, three dense layers (d2l uses
    sigmoid; ReLU learns in fewer steps)."""
    return nn.Sequential(
        nn.Conv2d(1, 6, kernel_size=5, padding=2), activation(),
        nn.AvgPool2d(kernel_size=2, stride=2),
        nn.Conv2d(6, 16, kernel_size=5), activation(),
        nn.AvgPool2d(kernel_size=2, stride=2),
        nn.Flatten(),
        nn.Linear(16 * 5 * 5, 120), activation(),
        nn.Linear(120, 84), activation(),
        nn.Linear(84, CLASSES))


def init_weights(model):
    for m in model.modules():
        if isinstance(m, (nn.Linear, nn.Conv2d)):
            nn.init.xavier_uniform_(m.weight)


def synthetic_fashion(n, seed):
    """n images (n, 1, 28, 28) in [0, 1] and labels (n,), identical for identical
    arguments: class templates of random strokes, shifted by up to 2 pixels, plus
    noise."""
    g = torch.Generator().manual_seed(1234)  # templates: the same for every split
    templates = (torch.rand(CLASSES, 1, IMAGE // 4, IMAGE // 4, generator=g) > 0.6).float()
    templates = nn.functional.interpolate(templates, size=(IMAGE, IMAGE), mode="bilinear",
                                          align_corners=False)
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, CLASSES, (n,), generator=g)
    images = templates[labels]
    shifts = torch.randint(-2, 3, (n, 2), generator=g)
    for k in range(n):
        images[k] = torch.roll(images[k], shifts=(int(shifts[k, 0]), int(shifts[k, 1])),
                               dims=(1, 2))
    images = (0.7 * images + 0.3 * torch.rand(n, 1, IMAGE, IMAGE, generator=g)).clamp(0, 1)
    return images, labels


def shard(global_batch, rank, size):
    """This rank's contiguous slice of a global batch (sizes differ by at most one)."""
    n = global_batch.shape[0]
    start = n * rank // size
    return global_batch[start:n * (rank + 1) // size]


def evaluate(model, images, labels, batch):
    """Accuracy over this rank's shard, summed over ranks."""
    model.eval()
    correct = torch.zeros(2, dtype=torch.float64)
    with torch.no_grad():
        for i in range(0, images.shape[0], batch):
            x, y = shard(images[i:i + batch], hvd.rank(), hvd.size()), \
                shard(labels[i:i + batch], hvd.rank(), hvd.size())
            correct[0] += (model(x).argmax(1) == y).sum()
            correct[1] += y.numel()
    correct = hvd.allreduce(correct, op=hvd.Sum, name="eval.correct")
    return float(correct[0] / correct[1])


def parameters_identical(model):
    """True when every rank holds bit-identical parameters (max == min over ranks)."""
    flat = torch.cat([p.detach().reshape(-1).double() for p in model.parameters()])
    hi = hvd.allreduce(flat, op=hvd.Max, name="check.max")
    lo = hvd.allreduce(flat, op=hvd.Min, name="check.min")
    return bool(torch.equal(hi, lo))


def train(args):
    torch.manual_seed(args.seed)
    model = lenet(nn.ReLU if args.activation == "relu" else nn.Sigmoid)
    init_weights(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
    train_x, train_y = synthetic_fashion(args.train_size, seed=1)
    test_x, test_y = synthetic_fashion(args.test_size, seed=2)
    loss_fn = nn.CrossEntropyLoss()
    if hvd.rank() == 0:
        print("kolo %s: %d rank(s), LeNet, %d train / %d test images, global batch %d, "
              "lr %g" % (hvd.__name__, hvd.size(), args.train_size, args.test_size,
                         args.batch_size, args.lr), flush=True)
    for epoch in range(args.epochs):
        model.train()
        start = time.perf_counter()
        order = torch.randperm(args.train_size, generator=torch.Generator().manual_seed(epoch))
        total = torch.zeros(3, dtype=torch.float64)  # loss sum, correct, count
        for i in range(0, args.train_size, args.batch_size):
            idx = shard(order[i:i + args.batch_size], hvd.rank(), hvd.size())
            x, y = train_x[idx], train_y[idx]
            optimizer.zero_grad()
            out = model(x)
            loss = loss_fn(out, y)
            loss.backward()
            optimizer.step()
            total += torch.tensor([float(loss) * y.numel(), float((out.argmax(1) == y).sum()),
                                   y.numel()], dtype=torch.float64)
        total = hvd.allreduce(total, op=hvd.Sum, name="epoch.totals")
        seconds = hvd.allreduce(torch.tensor([time.perf_counter() - start]), op=hvd.Max,
                                name="epoch.seconds")
        test_acc = evaluate(model, test_x, test_y, args.batch_size)
        if hvd.rank() == 0:
            print("epoch %d: loss %.4f, train acc %.3f, test acc %.3f, %.2f s/epoch" % (
                epoch + 1, total[0] / total[2], total[1] / total[2], test_acc,
                float(seconds)), flush=True)
    same = parameters_identical(model)
    if hvd.rank() == 0:
        print("parameters identical on all %d rank(s): %s" % (hvd.size(), same), flush=True)
    return same


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=128, help="global batch size")
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--train-size", type=int, default=6000)
    parser.add_argument("--test-size", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--activation", choices=["sigmoid", "relu"], default="relu")
    parser.add_argument("--threads", type=int, default=1, help="torch threads per rank")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    hvd.init()
    ok = train(args)
    hvd.shutdown()
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
