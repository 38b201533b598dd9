"""Backend "kolo" without mpiexec: init_process_group(backend="kolo") starts kolo's
socket world through torch's store (kolo/torch/distributed/_world.py).

    c10d_socket_world.py --spawn N   # torch.multiprocessing.spawn of N ranks; MASTER_ADDR
                                     # and MASTER_PORT set here, rank and size passed
    c10d_socket_world.py --env       # one rank of a torchrun-style job (RANK, WORLD_SIZE,
                                     # MASTER_ADDR, MASTER_PORT from the launcher:
                                     # tests/socket/socket_launch.py)
    c10d_socket_world.py --dead-peer N   # N spawned ranks; the last one is killed
                                         # while the others wait in dist.all_reduce
                                         # (dead_peer() says what each must see)

Each rank checks collectives (values), a new group, send/recv, a mismatch that
fails on every rank, and DDP training: bit-identical on every rank and within
1e-6 of the same training on a gloo group in the same processes. Prints
"c10d socket world: ok" on rank 0.
"""

import os
import signal
import socket
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import kolo
import kolo.torch.distributed  # noqa: F401 (registers backend "kolo")

MPI_VARIABLES = ("PMI_RANK", "PMI_SIZE", "PMIX_RANK", "OMPI_COMM_WORLD_RANK", "MPI_LOCALRANKID",
                 "PMI_FD", "PMI_PORT", "HYDRA_CONTROL_FD")


def check_collectives(rank, size):
    t = torch.full((5,), float(rank + 1))
    dist.all_reduce(t)
    assert torch.all(t == size * (size + 1) / 2), t
    b = torch.arange(4, dtype=torch.int64) * (rank + 1)
    dist.broadcast(b, src=size - 1)
    assert torch.equal(b, torch.arange(4) * size), b
    rows = [torch.empty(3) for _ in range(size)]
    dist.all_gather(rows, torch.full((3,), float(rank)))
    assert all(torch.all(r == i) for i, r in enumerate(rows)), rows
    w = dist.all_reduce(torch.ones(2), async_op=True)
    assert torch.all(w.get_future().wait()[0] == size)
    pair = dist.new_group([0, 1])
    if rank < 2:
        p = torch.tensor([float(rank)])
        dist.all_reduce(p, group=pair)
        assert p.item() == 1.0, p
    got = torch.empty(2)
    sent = dist.isend(torch.tensor([rank, 7.0]), (rank + 1) % size)
    dist.recv(got, (rank - 1) % size)
    sent.wait()
    assert got.tolist() == [(rank - 1) % size, 7.0], got
    dist.barrier()


def check_mismatch(rank):
    """One rank's all_reduce has another shape: an error on every rank, no hang."""
    try:
        dist.all_reduce(torch.ones(2 if rank == 0 else 3))
    except RuntimeError as e:
        assert "shape" in str(e).lower() or "mismatch" in str(e).lower(), e
    else:
        raise AssertionError("rank %d: a shape mismatch went through" % rank)
    dist.barrier()  # the group still works afterwards


def train(group, rank, steps=4):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2))
    ddp = torch.nn.parallel.DistributedDataParallel(model, process_group=group,
                                                    bucket_cap_mb=0.0005)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(100 + rank)
    for _ in range(steps):
        x = torch.randn(4, 8, generator=gen)
        loss = ddp(x).square().sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return torch.cat([p.detach().flatten() for p in model.parameters()])


def check_ddp(rank, size):
    on_kolo = train(None, rank)
    gloo = dist.new_group(list(range(size)), backend="gloo")
    on_gloo = train(gloo, rank)
    every = [torch.empty_like(on_kolo) for _ in range(size)]
    dist.all_gather(every, on_kolo)
    assert all(torch.equal(every[0], e) for e in every), "DDP on kolo: ranks differ"
    diff = (on_kolo - on_gloo).abs().max().item()
    assert diff <= 1e-6, "DDP on kolo vs gloo: max difference %g" % diff


def run(rank, size):
    dist.init_process_group(backend="kolo", init_method="env://", rank=rank, world_size=size)
    assert kolo.is_initialized() and (kolo.rank(), kolo.size()) == (rank, size)
    check_collectives(rank, size)
    check_mismatch(rank)
    check_ddp(rank, size)
    dist.barrier()
    dist.destroy_process_group()
    if rank == 0:
        print("c10d socket world: ok (%d ranks, no mpiexec)" % size, flush=True)


def spawned(rank, size):
    run(rank, size)


def dead_peer(rank, size):
    """The last rank is killed (SIGKILL) while every other rank waits in a
    synchronous all_reduce, which the waiting caller completes itself (Note [A
    waiting caller completes its own operation]): each gets a RuntimeError naming
    the dead rank within seconds, so does its next call, and the group's
    destruction returns."""
    dist.init_process_group(backend="kolo", init_method="env://", rank=rank, world_size=size)
    dist.all_reduce(torch.ones(2))
    dead = size - 1
    if rank == dead:
        time.sleep(0.5)  # the others are waiting in their next all_reduce by now
        os.kill(os.getpid(), signal.SIGKILL)
    for attempt in ("pending when it died", "after"):
        start = time.monotonic()
        try:
            dist.all_reduce(torch.ones(2))
        except RuntimeError as e:
            seconds = time.monotonic() - start
            assert "rank %d" % dead in str(e), "rank %d, %s: %s" % (rank, attempt, e)
            assert seconds < 10, "rank %d, %s: %.1f s to fail" % (rank, attempt, seconds)
        else:
            raise AssertionError("rank %d: an all_reduce %s went through" % (rank, attempt))
    dist.destroy_process_group()
    if rank == 0:
        print("c10d socket world: ok (rank %d killed, every other rank told)" % dead, flush=True)


def main():
    torch.set_num_threads(1)
    if sys.argv[1:2] in (["--spawn"], ["--dead-peer"]):
        size = int(sys.argv[2])
        for name in MPI_VARIABLES + ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
            os.environ.pop(name, None)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        if sys.argv[1] == "--spawn":
            mp.spawn(spawned, args=(size,), nprocs=size, join=True)
            return
        ranks = mp.start_processes(dead_peer, args=(size,), nprocs=size, join=False)
        for rank, p in enumerate(ranks.processes):
            p.join(60)
            want = -signal.SIGKILL if rank == size - 1 else 0
            assert p.exitcode == want, "rank %d exited with %s" % (rank, p.exitcode)
    elif sys.argv[1:2] == ["--env"]:
        run(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
