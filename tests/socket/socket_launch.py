#!/usr/bin/env python3
"""Runs a program as an N-rank socket-world job without mpiexec, the way torchrun
starts one: each rank a process of its own with MASTER_ADDR, MASTER_PORT, RANK,
WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, a random KOLO_JOB_TOKEN and
KOLO_WORLD=socket in its environment, and no MPI launcher's variables (so that
kolo_init picks the socket world; a program that initialises MPI itself gets an
MPI world of one rank; KOLO_TEST_BARRIER_DIR, a fresh directory, lets the tests
meet without MPI: tests/multirank/world_barrier.h). kolo's store is at MASTER_ADDR:MASTER_PORT+1 (served by
rank 0); MASTER_PORT itself is left free, as torchrun's own store would hold it.

usage: socket_launch.py -n N [--timeout S] [--grace S] [-x VAR=VALUE]... [--rank-env R:VAR=VALUE]...
                        -- PROGRAM [ARGS...]

Exit status: 0 when every rank exits 0; else the first failing rank's status (a
rank killed by signal n: 128 + n). As mpiexec does, once a rank fails the others
get --grace seconds to finish, then are killed; at --timeout every rank is killed
and the status is 124.
"""
import argparse
import ctypes
import os
import secrets
import signal
import socket
import subprocess
import shutil
import sys
import tempfile
import time

MPI_VARIABLES = ("PMI_RANK", "PMI_SIZE", "PMIX_RANK", "OMPI_COMM_WORLD_RANK", "MPI_LOCALRANKID",
                 "PMI_FD", "PMI_PORT", "HYDRA_CONTROL_FD")


def free_port_pair():
    """A port p on 127.0.0.1 such that p and p + 1 were both free just now."""
    for _ in range(100):
        with socket.socket() as a:
            a.bind(("127.0.0.1", 0))
            port = a.getsockname()[1]
            if port >= 65535:
                continue
            with socket.socket() as b:
                try:
                    b.bind(("127.0.0.1", port + 1))
                except OSError:
                    continue
            return port
    raise SystemExit("socket_launch.py: found no two free neighbouring ports")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, required=True, help="number of ranks")
    parser.add_argument("--timeout", type=float, default=280.0, help="kill every rank after S seconds")
    parser.add_argument("--grace", type=float, default=20.0,
                        help="after a rank fails, the others' time to finish")
    parser.add_argument("-x", action="append", default=[], metavar="VAR=VALUE",
                        help="an extra variable for every rank")
    parser.add_argument("--rank-env", action="append", default=[], metavar="R:VAR=VALUE",
                        help="an extra variable for rank R alone")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if args.n < 1 or not command:
        parser.error("need -n N >= 1 and a program")
    base = {k: v for k, v in os.environ.items() if k not in MPI_VARIABLES}
    barriers = tempfile.mkdtemp(prefix="kolo-socket-barriers-")
    base.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port_pair()), WORLD_SIZE=str(args.n),
                LOCAL_WORLD_SIZE=str(args.n), KOLO_WORLD="socket",
                KOLO_JOB_TOKEN=secrets.token_hex(16), KOLO_TEST_BARRIER_DIR=barriers)
    for pair in args.x:
        name, _, value = pair.partition("=")
        base[name] = value
    per_rank = {}
    for item in args.rank_env:
        rank, _, pair = item.partition(":")
        name, _, value = pair.partition("=")
        per_rank.setdefault(int(rank), {})[name] = value
    try:
        return run(args, command, base, per_rank)
    finally:
        shutil.rmtree(barriers, ignore_errors=True)


def die_with_the_launcher():
    """In a rank, before exec: SIGKILL when the launcher dies (CTest's timeout kills it)."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def run(args, command, base, per_rank):
    ranks = []
    for r in range(args.n):
        env = dict(base, RANK=str(r), LOCAL_RANK=str(r), **per_rank.get(r, {}))
        ranks.append(subprocess.Popen(command, env=env, start_new_session=True,
                                      preexec_fn=die_with_the_launcher))
    start = time.monotonic()
    first_failure = None
    failed_at = None
    while True:
        running = [p for p in ranks if p.poll() is None]
        for p in ranks:
            code = p.returncode
            if code is not None and code != 0 and first_failure is None:
                first_failure = 128 - code if code < 0 else code
                failed_at = time.monotonic()
                print("socket_launch.py: rank %d exited with %s" %
                      (ranks.index(p), "signal %d" % -code if code < 0 else "status %d" % code),
                      file=sys.stderr)
        if not running:
            break
        now = time.monotonic()
        late = failed_at is not None and now - failed_at > args.grace
        if now - start > args.timeout or late:
            for p in running:
                os.killpg(p.pid, signal.SIGKILL)
            for p in running:
                p.wait()
            if not late:
                print("socket_launch.py: killed every rank after %.0f s" % args.timeout,
                      file=sys.stderr)
                return 124
            break
        time.sleep(0.05)
    return first_failure or 0


if __name__ == "__main__":
    sys.exit(main())
