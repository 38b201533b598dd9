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
--model names one of them; Horovod's default, resnet50, needs it).

Horovod's flags, with Horovod's meaning (--backend kolo):
  --fp16-allreduce          gradients travel as float16 (hvd.Compression.fp16)
  --use-adasum              DistributedOptimizer(op=hvd.Adasum): the ranks' updates are
                            combined by Adasum; the learning rate is not scaled by the
                            world size (Horovod scales it by size() otherwise)
  --batches-per-allreduce k k forward/backward passes of --batch-size per optimizer
                            step, accumulated locally (backward_passes_per_step=k), as
                            Horovod's pytorch_imagenet_resnet50.py; a step then counts
                            k * batch-size images
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
                                             compression=compression,
                                             backward_passes_per_step=args.batches_per_allreduce,
                                             op=hvd.Adasum if args.use_adasum else hvd.Average)
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
        if args.fp16_allreduce or args.use_adasum or args.batches_per_allreduce != 1:
            sys.exit("--fp16-allreduce, --use-adasum and --batches-per-allreduce are only for "
                     "--backend kolo")
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
    parser.add_argument("--fp16-allreduce", action="store_true",
                        help="use fp16 compression during allreduce")
    parser.add_argument("--use-adasum", action="store_true",
                        help="use the Adasum algorithm to do the reduction")
    parser.add_argument("--batches-per-allreduce", type=int, default=1,
                        help="batches processed locally before each allreduce (it multiplies "
                             "the images per step)")
    parser.add_argument("--no-cuda", action="store_true",
                        help="accepted for Horovod's command lines; this benchmark runs on CPU")
    parser.add_argument("--threads", type=int, default=1, help="torch threads per rank")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    backend = Kolo() if args.backend == "kolo" else Gloo()
    torch.manual_seed(0)
    model, shape = build_model(args.model)
    if args.batches_per_allreduce < 1:
        sys.exit("--batches-per-allreduce must be at least 1")
    # As Horovod's example: the learning rate scales with the world size, except
    # with Adasum, which does not need it.
    lr_scaler = 1 if args.use_adasum else backend.size
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01 * lr_scaler)
    model, optimizer = backend.wrap(model, optimizer, args)
    data = torch.randn(args.batch_size, *shape)
    target = torch.randint(0, 10, (args.batch_size,))

    def step():
        optimizer.zero_grad()
        for _ in range(args.batches_per_allreduce):
            loss = F.cross_entropy(model(data), target)
            loss.div_(args.batches_per_allreduce)
            loss.backward()
        optimizer.step()

    def log(text):
        if backend.rank == 0:
            print(text, flush=True)

    params = sum(p.numel() for p in model.parameters())
    images_per_step = args.batch_size * args.batches_per_allreduce
    log("Model: %s (%.2f M parameters), batch size %d per rank, backend %s, %d rank(s)%s%s%s" % (
        args.model, params / 1e6, args.batch_size, args.backend, backend.size,
        ", fp16 allreduce" if args.fp16_allreduce else "",
        ", adasum" if args.use_adasum else "",
        ", %d batches per allreduce" % args.batches_per_allreduce
        if args.batches_per_allreduce != 1 else ""))
    timeit.timeit(step, number=args.num_warmup_batches)
    rates = []
    for i in range(args.num_iters):
        t = timeit.timeit(step, number=args.num_batches_per_iter)
        rate = images_per_step * args.num_batches_per_iter / t
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
