"""Which kolo world the default group of backend "kolo" starts, and how.

Contract: ``start(store, rank, size)`` is called by the default group's creator
(on every rank, from init_process_group); it returns once kolo runs here with
torch's rank and size, or raises RuntimeError carrying kolo's message.

- Under an MPI launcher (mpiexec, kolorun through MPI: PMI_RANK, ... set), or with
  KOLO_WORLD=mpi: the MPI world (kolo.init()); torch's rank and size must be the
  MPI job's.
- Otherwise (torchrun, torch.multiprocessing.spawn, any launcher that hands
  init_process_group a store, a rank and a size), or with KOLO_WORLD=socket: the
  socket world, formed through torch's store (Note [The socket world from
  torch's store]). No environment variable is needed beyond what torch needs.
- kolo running already (the program called kolo.init()): used as it is.

Note [The socket world from torch's store]
kolo_init_store takes a host and a port of kolo's own rendezvous store (torch's
store speaks another protocol, and the C API takes no Python store). So rank 0
picks a port free on its host, and publishes the host (MASTER_ADDR when set,
else its host name), the port and a fresh random job token in torch's store
under "kolo/socket_world/<n>" (n counts the worlds this process started, the
same on every rank); every rank reads them back and calls kolo_init_store,
where rank 0 serves kolo's store on that port. KOLO_JOB_TOKEN, when set, is
used instead of the published token (it is not written into torch's store,
which has no authentication). A port taken by another process between rank 0's
pick and kolo's listen fails init on every rank within KOLO_INIT_TIMEOUT_SECONDS
(the other ranks then reach a server that drops them for the wrong token).
"""

import itertools
import json
import os
import secrets
import socket

from ... import _core

_MPI_LAUNCHERS = ("PMI_RANK", "PMI_SIZE", "PMIX_RANK", "OMPI_COMM_WORLD_RANK",
                  "MPI_LOCALRANKID")
_starts = itertools.count()


def wants_mpi(env=os.environ):
    """True when this rank should start the MPI world (as kolo_init decides, except
    that torch's store, rank and size replace torchrun's variables)."""
    world = env.get("KOLO_WORLD", "").strip().lower()
    if world in ("mpi", "socket"):
        return world == "mpi"
    return any(env.get(name) for name in _MPI_LAUNCHERS)


def _free_port():
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def _rendezvous(store, rank):
    """(host, port, token) of kolo's store, agreed through torch's store."""
    key = "kolo/socket_world/%d" % next(_starts)
    if rank == 0:
        where = {"host": os.environ.get("MASTER_ADDR") or socket.gethostname(),
                 "port": _free_port(), "token": secrets.token_hex(16)}
        store.set(key, json.dumps(where))
    where = json.loads(store.get(key))
    token = os.environ.get("KOLO_JOB_TOKEN") or where["token"]
    return where["host"], int(where["port"]), token


def _start_socket(store, rank, size):
    host, port, token = _rendezvous(store, rank)
    try:
        _core.init_store(host, port, rank, size, token)
    except Exception as e:  # noqa: BLE001 - kolo's message, as a RuntimeError
        raise RuntimeError("kolo backend: starting kolo's socket world through torch's store "
                           "(kolo's store at %s:%d) failed: %s" % (host, port, e)) from e


def _start_mpi():
    try:
        _core.init()
    except Exception as e:  # noqa: BLE001 - kolo's message, as a RuntimeError
        raise RuntimeError("kolo backend: kolo.init() failed: %s" % e) from e


def start(store, rank, size):
    """Starts kolo for the default group unless it runs; raises RuntimeError when
    kolo's world is not the one torch describes."""
    started_here = not _core.is_initialized()
    if started_here:
        if wants_mpi():
            _start_mpi()
        else:
            _start_socket(store, rank, size)
    if (_core.rank(), _core.size()) != (rank, size):
        raise RuntimeError(
            "kolo backend: torch.distributed gave rank %d of %d, but kolo's world (%s) has "
            "rank %d of %d. Under mpiexec or kolorun, RANK/WORLD_SIZE must match the MPI "
            "rank and size; a program that calls kolo.init() itself must start kolo on "
            "torch's ranks" % (rank, size, "started here" if started_here else "already "
                               "running", _core.rank(), _core.size()))
