"""PyTorch DDP on kolo, with a DistributedSampler: each rank trains on its own
shard of the data set every epoch, and kolo reduces the gradients.

    mpiexec -n 2 python3 ddp_distributed_sampler.py --epochs 3

Under mpiexec (or kolorun) kolo's world is the MPI job; set_env_from_world() sets
RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT from it for init_method="env://".
The data set is synthetic (a noisy linear map), so nothing is downloaded.
"""

import argparse

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

import kolo.torch.distributed as kolo_dist


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--samples", type=int, default=512)
    args = parser.parse_args()

    kolo_dist.set_env_from_world()
    dist.init_process_group(backend="kolo", init_method="env://")
    rank, size = dist.get_rank(), dist.get_world_size()

    g = torch.Generator().manual_seed(0)  # the same data set on every rank
    x = torch.randn(args.samples, 20, generator=g)
    y = x @ torch.randn(20, 1, generator=g) + 0.01 * torch.randn(args.samples, 1, generator=g)
    sampler = DistributedSampler(TensorDataset(x, y), num_replicas=size, rank=rank, shuffle=True,
                                 seed=1)
    loader = DataLoader(TensorDataset(x, y), batch_size=args.batch_size, sampler=sampler)

    torch.manual_seed(rank)  # ranks start apart: DDP broadcasts rank 0's parameters
    model = DDP(torch.nn.Sequential(torch.nn.Linear(20, 32), torch.nn.ReLU(),
                                    torch.nn.Linear(32, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)  # a new shuffle, split over the ranks
        total = torch.zeros(2)
        for xb, yb in loader:
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(xb), yb)
            loss.backward()
            opt.step()
            total += torch.tensor([loss.item() * len(xb), len(xb)])
        dist.all_reduce(total)  # the epoch's mean loss over every rank's samples
        if rank == 0:
            print("epoch %d: mean loss %.4f over %d samples" % (epoch, total[0] / total[1],
                                                                int(total[1])))
    weights = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    everyone = [torch.zeros_like(weights) for _ in range(size)]
    dist.all_gather(everyone, weights)
    same = all(torch.equal(w, weights) for w in everyone)
    if rank == 0:
        print("DDP on kolo, %d ranks: parameters %s on every rank" % (
            size, "identical" if same else "DIFFER"))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
