#!/usr/bin/env python3
"""Runs failure_probe under mpiexec.mpich -disable-auto-cleanup (or, with
--socket-launch, as a socket-world job without mpiexec) for one phase and
checks what every survivor saw (see failure_probe.cc).
In "resume" the stopped victim is resumed once every survivor has reported and
exited, and must then report KOLO_ERR_RANK_FAILED for its pending handle and end.
In "traced" the victim is held in a tracing stop (ptrace, as gdb -p does) for
three timeouts, then released: every rank, the victim too, must end with KOLO_OK
(exit status 77, a skip, where this process may not ptrace).

Kill phases: the victim dies at the phase ("stop", "resume": is stopped); every survivor must get
KOLO_ERR_RANK_FAILED naming the victim within the bound (the peer timeout plus
slack), a later operation must fail the same way, kolo_shutdown must return
within the bound, and the whole job must end (no survivor hangs). Shutdown
phases (order, reverse, idiom, busy): every rank's kolo_shutdown must return
promptly whatever the others do.

Usage: run_failure.py --mpiexec M --probe P --np N --phase PHASE [--timeout S]
Prints one row per survivor: phase, np, rank, code, detect_ms, shutdown_ms.
"""
import argparse
import ctypes
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

# The victim dies inside kolo at these failpoints (KOLO_TEST_DIE_AT, read by the
# probe, which arms them through libkolo's test-only entry point).
HOOKS = {"init": "init", "negotiate": "negotiate:40", "blocking": "negotiate:40",
         "blocking-shm": "shm:5", "shm": "shm:5",
         "shm-in-place": "shm-in-place:5", "shm-described": "shm:5",
         "shm-mapped": "shm-direct:5",
         "shm-share": "shm-direct:5", "ring": "ring:5",
         "mpi": "mpi:5",
         "teardown": "teardown"}
# Transports forced per phase (on every rank, so the plan agrees).
TRANSPORT = {"shm": "shm", "blocking-shm": "shm", "shm-in-place": "shm", "shm-described": "shm",
             "shm-mapped": "shm", "shm-share": "shm",
             "ring": "ring",
             "mpi": "mpi"}
SHUTDOWN_PHASES = ("order", "reverse", "idiom", "busy")


def victim_of(phase, np):
    if phase in SHUTDOWN_PHASES:
        return -2 if phase == "reverse" else -1
    # Rank 0 answers negotiation's slow path; kill it at 3 ranks, the last at 2.
    return np - 1 if np == 2 else 0


def command(args, victim, tmp):
    probe_phase = "order" if args.phase == "reverse" else args.phase
    if args.socket_launch:
        return socket_command(args, victim, tmp, probe_phase)
    cmd = [args.mpiexec, "-disable-auto-cleanup",
           "-genv", "KOLO_PEER_TIMEOUT_SECONDS", str(args.timeout)]
    if args.phase in TRANSPORT:
        cmd += ["-genv", "KOLO_TRANSPORT", TRANSPORT[args.phase]]
    for rank in range(args.np):
        if rank:
            cmd.append(":")
        cmd += ["-n", "1"]
        if rank == victim and args.phase in HOOKS:
            cmd += ["-env", "KOLO_TEST_DIE_AT", HOOKS[args.phase]]
        cmd += [args.probe, probe_phase, str(victim), tmp]
    return cmd


def socket_command(args, victim, tmp, probe_phase):
    """The same job in the socket world, started without mpiexec (--socket-launch)."""
    cmd = [sys.executable, args.socket_launch, "-n", str(args.np), "--grace", "30",
           "--timeout", str(args.job_limit), "-x", "KOLO_PEER_TIMEOUT_SECONDS=%s" % args.timeout]
    if args.phase in TRANSPORT:
        cmd += ["-x", "KOLO_TRANSPORT=" + TRANSPORT[args.phase]]
    if victim >= 0 and args.phase in HOOKS:
        cmd += ["--rank-env", "%d:KOLO_TEST_DIE_AT=%s" % (victim, HOOKS[args.phase])]
    return cmd + ["--", args.probe, probe_phase, str(victim), tmp]


def signal_ranks(tmp, ranks, signal_number):
    for rank in ranks:
        try:
            with open(os.path.join(tmp, "pid.%d" % rank)) as f:
                os.kill(int(f.read()), signal_number)
        except (OSError, ValueError):
            pass


def kill_leftovers(tmp, ranks):
    """Kills these ranks' processes (a stopped victim never ends by itself)."""
    signal_ranks(tmp, ranks, signal.SIGKILL)


PTRACE_ATTACH, PTRACE_DETACH, WALL = 16, 17, 0x40000000


class Traced:
    """Holds a process in a tracing stop, every thread, as gdb -p does."""

    def __init__(self, pid):
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p,
                                     ctypes.c_void_p]
        self.tids = []
        for tid in sorted(int(t) for t in os.listdir("/proc/%d/task" % pid)):
            if self.libc.ptrace(PTRACE_ATTACH, tid, None, None) != 0:
                err = ctypes.get_errno()
                self.release()
                raise OSError(err, "ptrace(PTRACE_ATTACH, %d): %s" % (tid, os.strerror(err)))
            os.waitpid(tid, WALL)
            self.tids.append(tid)

    def release(self):
        for tid in self.tids:
            self.libc.ptrace(PTRACE_DETACH, tid, None, None)
        self.tids = []


def hold_traced(args, victim, survivors, tmp):
    """"traced": once every rank loops, holds the victim for three timeouts (or
    until a survivor has given up on it), then releases it. False: no ptrace."""
    while not all(os.path.exists(os.path.join(tmp, "looping.%d" % r)) for r in range(args.np)):
        time.sleep(0.05)
    with open(os.path.join(tmp, "pid.%d" % victim)) as f:
        pid = int(f.read())
    try:
        traced = Traced(pid)
    except OSError as e:
        print("cannot trace rank %d: %s" % (victim, e))
        open(os.path.join(tmp, "released"), "w").close()
        return False
    held = time.monotonic()
    while time.monotonic() - held < 3 * args.timeout and not any(
            os.path.exists(os.path.join(tmp, "result.%d" % r)) for r in survivors):
        time.sleep(0.05)
    traced.release()
    open(os.path.join(tmp, "released"), "w").close()
    return True


def wait_job(job, args, victim, tmp, started):
    """Waits for the job; a stopped victim is killed once every survivor has
    reported. Returns True if the job had to be killed at the limit."""
    survivors = [r for r in range(args.np) if r != victim]
    killed_victim = False
    if args.phase == "traced" and not hold_traced(args, victim, survivors, tmp):
        args.skipped = True
    # The ranks run detached from hydra (failure_probe.cc, Note [Hydra's kill
    # despite -disable-auto-cleanup]): wait for the job and for every rank.
    while job.poll() is None or any_alive(tmp, args.np):
        if time.monotonic() - started > args.job_limit:
            kill_leftovers(tmp, range(args.np))
            try:
                job.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(job.pid, signal.SIGKILL)
                job.wait()
            return True
        reported = all(os.path.exists(os.path.join(tmp, "result.%d" % r)) for r in survivors)
        if args.phase == "stop" and reported and not killed_victim:
            kill_leftovers(tmp, [victim])
            killed_victim = True
        if args.phase == "resume" and reported and not killed_victim and \
                not any_alive(tmp, args.np, survivors):
            signal_ranks(tmp, [victim], signal.SIGCONT)
            killed_victim = True
        time.sleep(0.05)
    return False


def any_alive(tmp, np, ranks=None):
    for rank in range(np) if ranks is None else ranks:
        try:
            with open(os.path.join(tmp, "pid.%d" % rank)) as f:
                pid = int(f.read())
            with open("/proc/%d/stat" % pid) as f:
                if f.read().split(")")[-1].split()[0] != "Z":
                    return True
        except (OSError, ValueError):
            pass
    return False


def parse(line):
    row = dict(re.findall(r"(\w+)=(\S+)", line.split(" message=")[0]))
    row["message"] = line.split(" message=", 1)[1].strip() if " message=" in line else ""
    return row


def check(args, victim, tmp):
    """Returns a list of failures (empty: passed) and prints the rows."""
    bound_ms = args.timeout * 1000 + args.slack_ms
    failures = []
    expected = "KOLO_ERR_RANK_FAILED"
    if args.phase == "exit":
        expected = ("KOLO_ERR_RANK_FAILED", "KOLO_ERR_SHUTDOWN")
    elif args.phase == "traced":
        expected = ("KOLO_OK",)
    elif args.phase in SHUTDOWN_PHASES + ("teardown", "shutdown-after-death"):
        expected = ("KOLO_OK", "KOLO_ERR_SHUTDOWN")
    for rank in range(args.np):
        if rank == victim and args.phase not in ("resume", "traced"):
            continue
        path = os.path.join(tmp, "result.%d" % rank)
        if not os.path.exists(path):
            failures.append("rank %d reported nothing (hung or crashed)" % rank)
            continue
        with open(path) as f:
            row = parse(f.read())
        print("phase=%s np=%d rank=%d code=%s detect_ms=%s shutdown_ms=%s later=%s" %
              (args.phase, args.np, rank, row["code"], row["detect_ms"], row["shutdown_ms"],
               row["later"]))
        if row["code"] not in (expected if isinstance(expected, tuple) else (expected,)):
            failures.append("rank %d: %s (%s), expected %s" %
                            (rank, row["code"], row["message"], expected))
        if row["code"] == "KOLO_ERR_RANK_FAILED":
            # At init a survivor that gave up first has exited too and may be
            # the rank named.
            named = re.search(r"rank \d+", row["message"]) if args.phase == "init" else None
            if rank == victim:  # "resume": any survivor may be the one named
                named = re.search(r"rank \d+", row["message"])
            if "rank %d" % victim not in row["message"] and not named:
                failures.append("rank %d: the message does not name rank %d: %s" %
                                (rank, victim, row["message"]))
            if rank != victim and float(row["detect_ms"]) > bound_ms:
                failures.append("rank %d: detected after %s ms (bound %d)" %
                                (rank, row["detect_ms"], bound_ms))
            if args.phase != "init" and row["later"] != "KOLO_ERR_RANK_FAILED":
                failures.append("rank %d: a later operation gave %s" % (rank, row["later"]))
        shutdown_bound = 1000 if args.phase in SHUTDOWN_PHASES else bound_ms
        if float(row["shutdown_ms"]) > shutdown_bound:
            failures.append("rank %d: kolo_shutdown took %s ms (bound %d)" %
                            (rank, row["shutdown_ms"], shutdown_bound))
    return failures


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--mpiexec", default="mpiexec.mpich")
    p.add_argument("--socket-launch", help="tests/socket/socket_launch.py: the socket world "
                   "without mpiexec instead")
    p.add_argument("--probe", required=True)
    p.add_argument("--np", type=int, default=2)
    p.add_argument("--phase", required=True)
    p.add_argument("--timeout", type=float, default=2.0, help="KOLO_PEER_TIMEOUT_SECONDS")
    p.add_argument("--slack-ms", type=int, default=2000)
    p.add_argument("--job-limit", type=float, default=60.0)
    args = p.parse_args()
    args.skipped = False
    victim = victim_of(args.phase, args.np)
    with tempfile.TemporaryDirectory(prefix="kolo-failure-") as tmp:
        started = time.monotonic()
        log_path = os.path.join(tmp, "job.log")
        with open(log_path, "w") as log:
            job = subprocess.Popen(command(args, victim, tmp), stdout=log,
                                   stderr=subprocess.STDOUT, start_new_session=True)
            hung = wait_job(job, args, victim, tmp, started)
        failures = check(args, victim, tmp)
        if hung:
            failures.append("the job did not end within %.0f s" % args.job_limit)
        print("job took %.1f s" % (time.monotonic() - started))
        if failures:
            with open(log_path) as log:
                print(log.read())
            for f in failures:
                print("FAIL: " + f)
            return 1
    return 77 if args.skipped else 0


if __name__ == "__main__":
    sys.exit(main())
