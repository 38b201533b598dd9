#!/usr/bin/python3
"""Synthetic training throughput, in the manner of Horovod's pytorch_synthetic_benchmark.py.

    mpiexec.mpich -n 2 /usr/bin/python3 pytorch_synthetic_benchmark.py --backend kolo
    mpiexec.mpich -n 2 /usr/bin/python3 pytorch_synthetic_benchmark.py --backend gloo

One step = forward, backward, gradient averaging, SGD update, on a fixed random batch.
--backend kolo averages with kolo.torch.DistributedOptimizer (each gradient's
allreduce starts from its backward hook); --backend gloo is the plain torch.distributed
reference: DistributedDataParallel over the gloo backend (bucketed allreduce overlapped
with backward), initialised from mpiexec's PMI_RANK / PMI_SIZE. Both are timed the
same way: warm-up batches, then --num-iters timings of --num-batches-per-iter steps;
it prints images/second per rank (mean +- 1.96 sd) and in total. torchvision is not
needed: the models are defined here (torchvision's are used when it is installed and
--model names one of them).
"""

import argparse
import os
import sys
import timeit

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.short = nn.Sequential()
        if stride != 1 or cin != cout:
            self.short = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                       nn.BatchNorm2d(cout))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(out)) + self.short(x))


def resnet_cifar(blocks_per_stage, classes=10):
    """A CIFAR-style ResNet (3 stages of 16/32/64 channels) on 32x32 RGB images."""
    layers, cin = [nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU()], 16
    for stage, cout in enumerate((16, 32, 64)):
        for b in range(blocks_per_stage):
            layers.append(BasicBlock(cin, cout, 2 if (b == 0 and stage > 0) else 1))
            cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, classes)]
    return nn.Sequential(*layers)


def build_model(name):
    """(model, input shape of one image)."""
    if name == "lenet":
        from fashion_lenet import lenet
        return lenet(), (1, 28, 28)
    if name == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024),
                             nn.ReLU(), nn.Linear(1024, 10)), (1, 28, 28)
    if name == "resnet20":
        return resnet_cifar(3), (3, 32, 32)
    if name == "resnet8":
        return resnet_cifar(1), (3, 32, 32)
    try:
        from torchvision import models
    except ImportError:
        sys.exit("unknown model %r (choose lenet, mlp, resnet8, resnet20; others need "
                 "torchvision)" % name)
    return getattr(models, name)(), (3, 224, 224)


class Kolo:
    def __init__(self):
        import kolo.torch as hvd
        self.hvd = hvd
        hvd.init()
        self.rank, self.size = hvd.rank(), hvd.size()

    def wrap(self, model, optimizer, args):
        hvd = self.hvd
        compression = hvd.Compression.fp16 if args.fp16_allreduce else hvd.Compression.none
        optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(),
                                             compression=compression)
        hvd.broadcast_parameters(model.state_dict(), root_rank=0)
        hvd.broadcast_optimizer_state(optimizer, root_rank=0)
        return model, optimizer

    def gather(self, value):
        slots = torch.zeros(self.size, dtype=torch.float64)
        slots[self.rank] = value
        return self.hvd.allreduce(slots, op=self.hvd.Sum, name="gather.rates").numpy()

    def finish(self):
        self.hvd.shutdown()


class Gloo:
    def __init__(self):
        import torch.distributed as dist
        self.dist = dist
        os.environ.setdefault("RANK", os.environ.get("PMI_RANK", "0"))
        os.environ.setdefault("WORLD_SIZE", os.environ.get("PMI_SIZE", "1"))
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29517")
        dist.init_process_group("gloo", init_method="env://")
        self.rank, self.size = dist.get_rank(), dist.get_world_size()

    def wrap(self, model, optimizer, args):
        if args.fp16_allreduce:
            sys.exit("--fp16-allreduce is only for --backend kolo")
        return nn.parallel.DistributedDataParallel(model, broadcast_buffers=False), optimizer

    def gather(self, value):
        out = [torch.zeros(1, dtype=torch.float64) for _ in range(self.size)]
        self.dist.all_gather(out, torch.tensor([value], dtype=torch.float64))
        return torch.cat(out).numpy()

    def finish(self):
        self.dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser(description="kolo / gloo synthetic benchmark")
    parser.add_argument("--backend", choices=["kolo", "gloo"], default="kolo")
    parser.add_argument("--model", default="resnet8")
    parser.add_argument("--batch-size", type=int, default=32, help="per rank")
    parser.add_argument("--num-warmup-batches", type=int, default=3)
    parser.add_argument("--num-batches-per-iter", type=int, default=5)
    parser.add_argument("--num-iters", type=int, default=5)
    parser.add_argument("--fp16-allreduce", action="store_true")
    parser.add_argument("--threads", type=int, default=1, help="torch threads per rank")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    backend = Kolo() if args.backend == "kolo" else Gloo()
    torch.manual_seed(0)
    model, shape = build_model(args.model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    model, optimizer = backend.wrap(model, optimizer, args)
    data = torch.randn(args.batch_size, *shape)
    target = torch.randint(0, 10, (args.batch_size,))

    def step():
        optimizer.zero_grad()
        F.cross_entropy(model(data), target).backward()
        optimizer.step()

    def log(text):
        if backend.rank == 0:
            print(text, flush=True)

    params = sum(p.numel() for p in model.parameters())
    log("Model: %s (%.2f M parameters), batch size %d per rank, backend %s, %d rank(s)%s" % (
        args.model, params / 1e6, args.batch_size, args.backend, backend.size,
        ", fp16 allreduce" if args.fp16_allreduce else ""))
    timeit.timeit(step, number=args.num_warmup_batches)
    rates = []
    for i in range(args.num_iters):
        t = timeit.timeit(step, number=args.num_batches_per_iter)
        rate = args.batch_size * args.num_batches_per_iter / t
        log("Iter #%d: %.1f img/sec per rank" % (i, rate))
        rates.append(rate)
    # Every rank's mean rate; the slowest rank sets the pace of synchronous training.
    means = backend.gather(float(np.mean(rates)))
    mean, conf = np.mean(rates), 1.96 * np.std(rates)
    log("Img/sec per rank: %.1f +-%.1f (rank 0); min over ranks %.1f" % (mean, conf, means.min()))
    log("Total img/sec on %d rank(s): %.1f" % (backend.size, means.sum()))
    backend.finish()


if __name__ == "__main__":
    main()
