"""A DDP step's communication over ResNet-50's gradients: backend "kolo" against
gloo in the same processes (issue 30, "Speed").

    mpiexec.mpich -n 2 -bind-to core python3 ddp_comm_bench.py      # kolo's MPI world
    python3 ddp_comm_bench.py --spawn 2                              # kolo's socket world
    torchrun --nproc_per_node 2 ddp_comm_bench.py                    # socket world, from the
                                                # variables torchrun sets (RANK, WORLD_SIZE, ...)

The model has one parameter of each shape in bench/profiles/resnet50.txt (161
tensors, 25.6 M float32, 102 MB; torchvision is not needed), and a loss whose
backward pass is next to free (the sum of every parameter), so a step's time is
DDP's bucketing and allreduce of the gradients. Each repeat times --steps
forward+backward passes under DDP on kolo's default group, on a gloo group of
the same ranks, and without communication (DDP's no_sync: the compute alone),
in turns so that both backends see the same load, and under DDP with a comm
hook that communicates nothing ("DDP alone": the copies of the gradients into
the buckets and back, which DDP makes whatever the backend). Rank 0 prints one
row per repeat and the medians; "communication" is a step less DDP alone.

--breakdown also times, in the same processes, the allreduce of buffers of the
sizes of DDP's buckets (all started, then all waited for): through kolo's own
API (kolo.torch.allreduce_async_), through torch.distributed on backend "kolo",
on gloo, and a plain copy of the same bytes (the memory's speed).
"""

import argparse
import os
import socket
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import kolo.torch
import kolo.torch.distributed  # noqa: F401 (registers backend "kolo")

HERE = os.path.dirname(os.path.abspath(__file__))
PROFILE = os.path.join(HERE, "..", "..", "..", "bench", "profiles", "resnet50.txt")


def shapes(path):
    out = []
    for line in open(path):
        if line.strip() and not line.startswith("#"):
            out.append(tuple(int(d) for d in line.split()[2].split("x")))
    return out


class Gradients(torch.nn.Module):
    """One parameter of each shape; forward is the sum of them all."""

    def __init__(self, profile):
        super().__init__()
        self.params = torch.nn.ParameterList(
            torch.nn.Parameter(torch.zeros(s)) for s in shapes(profile))

    def forward(self):
        return torch.stack([p.sum() for p in self.params]).sum()


def time_steps(ddp, steps, sync=True):
    for p in ddp.parameters():
        p.grad = None
    start = time.perf_counter()
    for _ in range(steps):
        if sync:
            ddp().backward()
        else:
            with ddp.no_sync():
                ddp().backward()
    dist.barrier()
    return (time.perf_counter() - start) / steps * 1e3


def no_communication(bucket_sizes):
    """A DDP comm hook that hands the bucket back as it is, noting its size."""
    def hook(state, bucket):
        bucket_sizes.append(bucket.buffer().numel())
        future = torch.futures.Future()
        future.set_result(bucket.buffer())
        return future
    return hook


def time_calls(fn, steps):
    dist.barrier()
    start = time.perf_counter()
    for _ in range(steps):
        fn()
    dist.barrier()
    return (time.perf_counter() - start) / steps * 1e3


def breakdown(rank, gloo, sizes, args):
    """Times the allreduce of one buffer per DDP bucket, each way (module comment)."""
    bufs = [torch.ones(n) for n in sizes]
    copies = [torch.empty(n) for n in sizes]

    def kolo_api():
        handles = [kolo.torch.allreduce_async_(b, op=kolo.torch.Sum, name="breakdown.%d" % i)
                   for i, b in enumerate(bufs)]
        for h in handles:
            kolo.torch.synchronize(h)

    def backend(group):
        def fn():
            for w in [dist.all_reduce(b, group=group, async_op=True) for b in bufs]:
                w.wait()
        return fn

    def copy():
        for c, b in zip(copies, bufs):
            c.copy_(b)
    ways = {"kolo API": kolo_api, "backend kolo": backend(None), "gloo": backend(gloo),
            "copy": copy}
    for fn in ways.values():
        time_calls(fn, 1)
    rows = [{name: time_calls(fn, args.steps) for name, fn in ways.items()}
            for _ in range(args.repeats)]
    if rank == 0:
        med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
        print("breakdown: the allreduce of %d buffers of DDP's bucket sizes (%.1f MB), median "
              "of %d repeats: %s" % (len(sizes), sum(sizes) * 4 / 1e6, args.repeats,
                                     "  ".join("%s %.1f ms" % kv for kv in med.items())),
              flush=True)


def run(rank, size, args):
    torch.set_num_threads(1)
    if args.kolo_memory:
        kolo.torch.use_kolo_memory()  # before DDP makes its buckets
    dist.init_process_group(backend="kolo", init_method="env://", rank=rank, world_size=size)
    gloo = dist.new_group(list(range(size)), backend="gloo")
    model = Gradients(args.profile)
    n = sum(p.numel() for p in model.parameters())

    def ddp(group=None):
        return torch.nn.parallel.DistributedDataParallel(
            model, process_group=group, bucket_cap_mb=args.bucket_mb,
            gradient_as_bucket_view=args.gradient_as_bucket_view)
    ddps = {"kolo": ddp(), "gloo": ddp(gloo), "ddp": ddp()}
    bucket_sizes = []
    ddps["ddp"].register_comm_hook(None, no_communication(bucket_sizes))
    for model_ddp in ddps.values():
        if args.warmup:
            time_steps(model_ddp, args.warmup)
    del bucket_sizes[:]
    time_steps(ddps["ddp"], 1)  # DDP's buckets from its second step on
    time_steps(ddps["ddp"], 1)
    sizes = bucket_sizes[len(bucket_sizes) // 2:]
    rows = []
    for repeat in range(args.repeats):
        row = {name: time_steps(model_ddp, args.steps) for name, model_ddp in ddps.items()}
        row["compute"] = time_steps(ddps["kolo"], args.steps, sync=False)
        rows.append(row)
        if rank == 0:
            print("repeat %d: kolo %.1f ms  gloo %.1f ms  DDP alone %.1f ms  compute %.1f ms  "
                  "gloo/kolo %.2fx" % (repeat, row["kolo"], row["gloo"], row["ddp"],
                                       row["compute"], row["gloo"] / row["kolo"]), flush=True)
    if rank == 0:
        med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
        world = "MPI" if os.environ.get("PMI_RANK") else "socket"
        print("ddp_comm_bench: %d ranks (kolo's %s world), %d tensors, %.1f MB, bucket %g MB "
              "(%d buckets), gradient_as_bucket_view %s, kolo memory %s, %d steps x %d repeats"
              % (size, world, len(list(model.parameters())), n * 4 / 1e6, args.bucket_mb,
                 len(sizes), args.gradient_as_bucket_view, args.kolo_memory, args.steps,
                 args.repeats))
        print("median step: kolo %.1f ms  gloo %.1f ms  DDP alone %.1f ms  compute alone %.1f ms  "
              "gloo/kolo %.2fx  (communication, a step less DDP alone: kolo %.1f ms  gloo %.1f ms  "
              "gloo/kolo %.2fx)"
              % (med["kolo"], med["gloo"], med["ddp"], med["compute"], med["gloo"] / med["kolo"],
                 med["kolo"] - med["ddp"], med["gloo"] - med["ddp"],
                 (med["gloo"] - med["ddp"]) / max(med["kolo"] - med["ddp"], 1e-9)),
              flush=True)
    if args.breakdown:
        breakdown(rank, gloo, sizes, args)
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spawn", type=int, default=0,
                        help="start this many ranks here (socket world) instead of under mpiexec")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--bucket-mb", type=float, default=25.0)
    parser.add_argument("--profile", default=PROFILE)
    parser.add_argument("--gradient-as-bucket-view", action="store_true",
                        help="DDP's gradient_as_bucket_view=True (no copy of the buckets back "
                             "into the gradients)")
    parser.add_argument("--kolo-memory", action="store_true",
                        help="kolo.torch.use_kolo_memory() first: tensors of 1 MiB and up (the "
                             "buckets) in memory the peers read in place")
    parser.add_argument("--breakdown", action="store_true",
                        help="also time the buckets' allreduce alone, each way, and a copy")
    args = parser.parse_args()
    if args.spawn:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        mp.spawn(run, args=(args.spawn, args), nprocs=args.spawn, join=True)
        return
    if "PMI_RANK" in os.environ:
        kolo.torch.distributed.set_env_from_world()
    elif not all(v in os.environ for v in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")):
        sys.exit("run under mpiexec or torchrun, or with --spawn N")
    run(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), args)


if __name__ == "__main__":
    main()
