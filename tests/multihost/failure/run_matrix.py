#!/usr/bin/python3
"""The failure matrix across hosts: host_failure_probe on a pretend cluster
(tools/pretend_cluster.sh), disrupted mid-run, and what every survivor saw.

  run_matrix.py --cluster TOOL --probe PROBE CASE... [--timeout S] [--stacks]
  run_matrix.py --cluster TOOL --probe PROBE --group NAME | --ci | --all
                                        (--ci: every group but the soaks)
  run_matrix.py --list [--all]          the cases (--all: the full matrix)
  --world socket                        the same cases on kolo's socket world
                                        (default: mpi; see WORLDS below)

A case is LAYOUT.DISRUPTION.PHASE, e.g. 2x1.partition.ring:
  LAYOUT      2x1 or 2x2 (hosts x ranks per host; ranks fill h1 first)
  DISRUPTION  partition  h2's link cut both ways (the switch's side goes down),
                         restored once every rank has its verdict (nothing may
                         resume then)
              down       the same from h2's side (its eth0 goes down: its sends fail)
              blackhole  both ways, silently (every packet dropped, the link up)
              oneway     h2's outgoing packets dropped (it still receives), restored
              kill       every rank of h2 SIGKILLed
              stop       every rank of h2 SIGSTOPped for longer than the timeout,
                         SIGCONTed once h1's ranks have their verdicts
              slowlink   (soak) every link at 1 Gbit/s, 100 ms, 5 % loss (delay and
                         loss only where the kernel has netem); no verdict allowed
              oversub    (soak) 4 ranks and 2 busy loops on 2 cores; no verdict allowed
  PHASE       init idle negotiate ring hierarchical barrier join shutdown (soak: soak);
              mixed: the soak's sizes until the disruption
--all is LAYOUT x {partition, oneway, kill, stop} x the phases above but mixed, and
the soaks (on the socket world: without "hierarchical" and the soaks). All cases
of one invocation run in one cluster, one after another.

Each survivor must get KOLO_ERR_RANK_FAILED naming a rank of the other host
within the bound (kill: 1 s; otherwise KOLO_PEER_TIMEOUT_SECONDS + 2 s) after the
disruption (a stopped rank: after its SIGCONT); an allreduce after the links
healed must fail the same way (the job stays failed); kolo_shutdown must return
within the bound and every rank process must exit. In "shutdown" the verdict is
kolo_shutdown's return. Soak cases must finish every allreduce with KOLO_OK and
exact sums. A rank that reports nothing within the watchdog is a hang; with
--stacks its threads' backtraces (gdb) are printed. Times are CLOCK_MONOTONIC,
one clock for every namespace. Prints one row per rank; --json FILE writes them.
Exit 0: every case passed; 1: a case failed; 77: the cluster cannot run here.

WORLDS. mpi: one mpiexec.mpich -disable-auto-cleanup job through the cluster's
launcher-exec. socket: no mpiexec; each rank is started on its host through the
launcher-exec, as a torchrun-style launcher would (KOLO_WORLD=socket, RANK,
WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR=h1 whose rank 0 serves the
store, a fresh MASTER_PORT and job token per case), and every rank's process is
its own: a killed rank is no launcher's business. The socket world has no
hierarchical path yet: its "hierarchical" cases are refused.
"""
import argparse
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

PHASES = ("init", "idle", "negotiate", "ring", "hierarchical", "barrier", "join", "shutdown")
MORE_PHASES = ("mixed",)  # not in --all: the soak's sizes, until a failure
FAULTS = ("partition", "oneway", "kill", "stop")
MORE_FAULTS = ("down", "blackhole")  # not in --all: other ways to cut both ways
SOAKS = ("slowlink", "oversub")
TRANSPORT = {"ring": "ring", "hierarchical": "hierarchical"}
# The matrix, one CTest test per group, each group in one cluster: every phase
# under a cut link at both layouts, and the other disruptions where they differ
# most (CI: ctest -L multihost.failure); the soaks (ctest -L multihost.long_failure,
# not in CI: a slow link shaped by netem takes minutes).
GROUPS = {
    "partition.2x1": [f"2x1.partition.{p}" for p in PHASES if p != "hierarchical"],
    "partition.2x2": [f"2x2.partition.{p}" for p in ("init", "idle", "negotiate",
                                                     "hierarchical", "join", "shutdown")],
    "faults.2x1": [f"2x1.{f}.{p}" for f in ("oneway", "kill", "stop") for p in ("negotiate", "idle")] +
                  ["2x1.oneway.ring", "2x1.kill.ring", "2x1.kill.join", "2x1.kill.shutdown",
                   "2x1.stop.barrier", "2x1.stop.shutdown"],
    "faults.2x2": [f"2x2.{f}.{p}" for f in ("oneway", "kill", "stop") for p in ("negotiate", "idle")] +
                  ["2x2.oneway.hierarchical", "2x2.kill.hierarchical", "2x2.kill.init",
                   "2x2.stop.init"],
    "soak": ["2x1.slowlink.soak", "2x2.oversub.soak"],
}
CI_CASES = [c for name, group in GROUPS.items() if name != "soak" for c in group]
# The socket world's matrix: a few key cases at 2 x 1 in CI (ctest -L
# multihost.failure.socket, well under 2 minutes), the whole of it at each layout
# under ctest -L multihost.long_failure.socket.
SOCKET_GROUPS = {
    "socket.ci": ["2x1.partition.init", "2x1.partition.negotiate", "2x1.partition.ring",
                  "2x1.partition.shutdown", "2x1.oneway.negotiate", "2x1.kill.negotiate",
                  "2x1.kill.ring", "2x1.stop.idle", "2x1.stop.barrier"],
    "socket.2x1": [f"2x1.{f}.{p}" for f in FAULTS for p in PHASES if p != "hierarchical"],
    "socket.2x2": [f"2x2.{f}.{p}" for f in FAULTS for p in PHASES if p != "hierarchical"],
}


def all_cases(world="mpi"):
    if world == "socket":
        return SOCKET_GROUPS["socket.2x1"] + SOCKET_GROUPS["socket.2x2"]
    cases = []
    for layout in ("2x1", "2x2"):
        for fault in FAULTS:
            for phase in PHASES:
                if phase != "hierarchical" or layout == "2x2":
                    cases.append(f"{layout}.{fault}.{phase}")
    return cases + ["2x1.slowlink.soak", "2x2.slowlink.soak", "2x2.oversub.soak"]


class Case:
    def __init__(self, name, world="mpi"):
        parts = name.split(".")
        if len(parts) != 3 or parts[0] not in ("2x1", "2x2") or \
                parts[1] not in FAULTS + MORE_FAULTS + SOAKS or \
                parts[2] not in PHASES + MORE_PHASES + ("soak",) or \
                (parts[1] in SOAKS) != (parts[2] == "soak") or \
                (parts[2] == "hierarchical" and parts[0] != "2x2"):
            raise ValueError(f"no case '{name}' (run_matrix.py --list --all lists them)")
        if world == "socket" and parts[2] == "hierarchical":
            raise ValueError(f"{name}: the socket world has no hierarchical path yet")
        self.name = name
        self.layout, self.fault, self.phase = parts
        self.ppn = int(self.layout[2])
        self.np = 2 * self.ppn
        self.h1 = list(range(self.ppn))
        self.h2 = list(range(self.ppn, self.np))
        self.soak = self.fault in SOAKS


def now_ns():
    return time.monotonic_ns()


def read(tmp, name):
    try:
        with open(os.path.join(tmp, name)) as f:
            return f.read().strip()
    except OSError:
        return None


def pid_of(tmp, rank):
    text = read(tmp, f"pid.{rank}")
    return int(text) if text else None


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def signal_ranks(tmp, ranks, sig):
    for rank in ranks:
        pid = pid_of(tmp, rank)
        if pid:
            try:
                os.kill(pid, sig)
            except OSError:
                pass


def wait_until(predicate, deadline_ns, step=0.01):
    while not predicate():
        if now_ns() > deadline_ns:
            return False
        time.sleep(step)
    return True


def stacks(tmp, ranks, out):
    """Prints every thread's backtrace of each rank (gdb), for a hang."""
    for rank in ranks:
        pid = pid_of(tmp, rank)
        if not pid or not alive(pid):
            continue
        try:
            bt = subprocess.run(["gdb", "-p", str(pid), "-batch", "-nx", "-ex",
                                 "thread apply all bt 30"], capture_output=True, text=True,
                                timeout=60).stdout
        except (OSError, subprocess.TimeoutExpired) as e:
            bt = f"(gdb failed: {e})"
        keep = [l for l in bt.splitlines() if l.startswith(("Thread", "#"))]
        out.append(f"--- rank {rank} (pid {pid}) stacks ---\n" + "\n".join(keep))


def sockets(out):
    """Appends each host's TCP connections (ss), for a hang: which links carry what."""
    for host in os.environ["KOLO_CLUSTER_HOSTS"].split(","):
        text = subprocess.run([os.environ["KOLO_CLUSTER_ENTER"], host, "ss -tnpi"],
                              capture_output=True, text=True, timeout=30).stdout
        out.append(f"--- {host}: ss -tnpi ---\n" + text.rstrip())


def link(host, *words):
    subprocess.run([os.environ["KOLO_CLUSTER_LINK"], host] + list(words), check=True)


class Busy:
    """Busy loops beside the ranks (oversub)."""

    def __init__(self, n):
        self.procs = [subprocess.Popen(["/bin/sh", "-c", "while :; do :; done"])
                      for _ in range(n)]

    def stop(self):
        for p in self.procs:
            p.kill()
            p.wait()


class SocketJob:
    """The ranks of a socket-world case, one process each (Popen's poll, pid and
    wait as one job: it has ended once every rank has)."""

    def __init__(self, procs):
        self.procs = procs
        self.returncode = None

    def poll(self):
        codes = [p.poll() for p in self.procs]
        if any(c is None for c in codes):
            return None
        self.returncode = next((c for c in codes if c != 0), 0)
        return self.returncode

    def kill(self):
        for p in self.procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except OSError:
                    pass

    def wait(self):
        for p in self.procs:
            p.wait()
        return self.poll()


def launch_socket(case, args, tmp, log, port):
    """Each rank on its host through the launcher-exec, torchrun's way (WORLDS)."""
    variables = dict(KOLO_WORLD="socket", WORLD_SIZE=case.np, LOCAL_WORLD_SIZE=case.ppn,
                     MASTER_ADDR="h1", MASTER_PORT=port, KOLO_JOB_TOKEN=os.urandom(16).hex(),
                     KOLO_PEER_TIMEOUT_SECONDS=args.timeout, KOLO_FLIGHT_RECORDER_DIR=tmp)
    if case.phase in TRANSPORT:
        variables["KOLO_TRANSPORT"] = TRANSPORT[case.phase]
    # No MPI launcher's variables: the probe would take its rank from them.
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PMI_", "PMIX_", "OMPI_", "MPI_LOCALRANKID"))}
    procs = []
    for rank in range(case.np):
        mine = dict(variables, RANK=rank, LOCAL_RANK=rank % case.ppn)
        words = ["env"] + [f"{k}={v}" for k, v in mine.items()]
        words += [args.probe, case.phase, tmp, str(args.soak_iterations)]
        host = "h1" if rank in case.h1 else "h2"
        procs.append(subprocess.Popen(
            [os.environ["KOLO_CLUSTER_ENTER"], host, " ".join(shlex.quote(w) for w in words)],
            stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True))
    return SocketJob(procs)


def launch(case, args, tmp, log, port=0):
    if args.world == "socket":
        return launch_socket(case, args, tmp, log, port)
    env = dict(os.environ, KOLO_PEER_TIMEOUT_SECONDS=str(args.timeout))
    cmd = ["mpiexec.mpich", "-launcher", "ssh", "-launcher-exec", env["KOLO_CLUSTER_ENTER"],
           "-localhost", env["KOLO_CLUSTER_LOCALHOST"], "-hosts", env["KOLO_CLUSTER_HOSTS"],
           "-disable-auto-cleanup", "-ppn", str(case.ppn), "-n", str(case.np),
           "-genv", "KOLO_PEER_TIMEOUT_SECONDS", str(args.timeout),
           "-genv", "KOLO_FLIGHT_RECORDER_DIR", tmp]
    if case.phase in TRANSPORT:
        cmd += ["-genv", "KOLO_TRANSPORT", TRANSPORT[case.phase]]
    iterations = args.soak_iterations
    if case.fault == "slowlink" and os.environ.get("KOLO_CLUSTER_NETEM") == "1":
        iterations = args.slow_iterations
    cmd += [args.probe, case.phase, tmp, str(iterations)]
    return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env,
                            start_new_session=True)


def links_carry(limit_s=20):
    """Waits until each host reaches the other (a refused TCP connect answers)."""
    enter = os.environ["KOLO_CLUSTER_ENTER"]
    deadline = time.monotonic() + limit_s
    for a, b in (("h1", "h2"), ("h2", "h1")):
        while True:
            out = subprocess.run([enter, a, f"timeout 1 bash -c 'exec 3<>/dev/tcp/{b}/9' 2>&1"],
                                 capture_output=True, text=True).stdout
            if "refused" in out:
                break
            if time.monotonic() > deadline:
                return False
            time.sleep(0.2)
    return True


def disrupt(case):
    """Applies the case's disruption; returns when it is in place."""
    if case.fault == "partition":
        link("h2", "cut")
    elif case.fault == "down":
        link("h2", "down")
    elif case.fault == "blackhole":
        link("h2", "blackhole")
    elif case.fault == "oneway":
        link("h2", "drop-out")


def run_case(case, args, notes, port=0):
    """Runs one case; returns (rows, failures). `port`: the socket world's MASTER_PORT."""
    failures, rows = [], []
    bound_ms = 1000 if case.fault == "kill" else args.timeout * 1000 + 2000
    watchdog_ns = int((args.timeout + 25) * 1e9)
    tmp = tempfile.mkdtemp(prefix="kolo-matrix-")
    log_path = os.path.join(tmp, "job.log")
    busy = Busy(2) if case.fault == "oversub" else None
    if case.fault == "slowlink":
        netem = os.environ.get("KOLO_CLUSTER_NETEM") == "1"
        for h in ("h1", "h2"):
            link(h, "shape", "1gbit", "100ms" if netem else "0", "5" if netem else "0")
        if not netem:
            notes.append(f"{case.name}: this kernel has no netem: the links are 1 Gbit/s "
                         "without the 100 ms delay and 5 % loss")
    if not links_carry():
        failures.append("h1 and h2 do not reach each other before the case (the cluster)")
        return rows, failures
    log = open(log_path, "w")
    job = launch(case, args, tmp, log, port)
    started = now_ns()
    every = range(case.np)
    victims = case.h2 if case.fault in ("kill", "stop") else []
    expect = [r for r in every if r not in victims]  # verdicts before any SIGCONT
    try:
        limit = started + int(args.start_limit * 1e9)
        if not wait_until(lambda: all(read(tmp, f"ready.{r}") for r in every) or
                          job.poll() is not None or
                          any(read(tmp, f"verdict.{r}") for r in every), limit):
            failures.append(f"not every rank reached the phase within {args.start_limit:.0f} s")
        elif job.poll() is not None and not all(read(tmp, f"ready.{r}") for r in every):
            failures.append(f"the job ended (exit {job.returncode}) before every rank was ready")
        early = [r for r in every if read(tmp, f"verdict.{r}") and not case.soak]
        if early:
            failures.append(f"ranks {early} ended their phase before the disruption")
        event = now_ns()
        if not failures and not case.soak:
            time.sleep(0.3)  # well inside the loops
            disrupt(case)
            # A cut link is in place now; a signal counts from before it is sent (a
            # survivor may see the death before this driver runs again).
            event = now_ns()
            if case.fault == "kill":
                signal_ranks(tmp, victims, signal.SIGKILL)
            elif case.fault == "stop":
                signal_ranks(tmp, victims, signal.SIGSTOP)
            with open(os.path.join(tmp, "event.tmp"), "w") as f:
                f.write(str(event))
            os.rename(os.path.join(tmp, "event.tmp"), os.path.join(tmp, "event"))
        limit = event + (int(args.soak_limit * 1e9) if case.soak else watchdog_ns)
        hung = []
        if not failures and not wait_until(
                lambda: all(read(tmp, f"verdict.{r}") for r in expect), limit):
            hung = [r for r in expect if not read(tmp, f"verdict.{r}")]
        cont = None
        if case.fault == "stop" and not failures:
            if case.phase != "shutdown":
                time.sleep(0.2)
            cont = now_ns()
            signal_ranks(tmp, victims, signal.SIGCONT)
            if not wait_until(lambda: all(read(tmp, f"verdict.{r}") for r in victims),
                              cont + watchdog_ns):
                hung += [r for r in victims if not read(tmp, f"verdict.{r}")]
        if hung:
            failures.append(f"ranks {hung} reached no verdict within the watchdog (a hang)")
            if args.stacks:
                stacks(tmp, hung, failures)
                sockets(failures)
        if case.fault in ("partition", "down", "blackhole", "oneway"):
            link("h2", "restore")
            time.sleep(0.5)  # the links carry again: nothing may resume
        go_on = now_ns()
        open(os.path.join(tmp, "go-on"), "w").close()
        survivors = [r for r in every if case.fault != "kill" or r not in victims]
        if not wait_until(lambda: not any(alive(pid_of(tmp, r) or 0) for r in survivors),
                          go_on + int(20e9)):
            left = [r for r in survivors if alive(pid_of(tmp, r) or 0)]
            failures.append(f"ranks {left} did not exit within 20 s of go-on")
            if args.stacks:
                stacks(tmp, left, failures)
        exited = now_ns()
        if not wait_until(lambda: job.poll() is not None, now_ns() + int(20e9)):
            notes.append(f"{case.name}: {'the launcher-exec' if args.world == 'socket' else 'mpiexec'}"
                         " did not end within 20 s after its ranks (killed; the launcher's "
                         "business, not kolo's)")
        rows = collect(case, tmp, event, cont, bound_ms, failures, go_on, exited)
    finally:
        if busy:
            busy.stop()
        if case.fault == "slowlink":
            for h in ("h1", "h2"):
                link(h, "shape", args.rate, "0", "0")
        signal_ranks(tmp, every, signal.SIGCONT)
        signal_ranks(tmp, every, signal.SIGKILL)
        if job.poll() is None:
            job.kill() if args.world == "socket" else os.killpg(job.pid, signal.SIGKILL)
        job.wait()
        log.close()
        if failures or args.verbose:  # the outputs, with the failures or printed
            outputs = []
            with open(log_path) as f:
                outputs.append("--- job output ---\n" + f.read())
            for rank in every:
                text = read(tmp, f"log.{rank}")
                if text:
                    outputs.append(f"--- rank {rank}'s output ---\n" + text)
            if failures:
                failures += outputs
            else:
                print("\n".join(outputs))
        shutil.rmtree(tmp, ignore_errors=True)
    return rows, failures


def parse(line):
    head, _, message = line.partition(" message=")
    row = dict(re.findall(r"(\w+)=(\S+)", head))
    row["message"] = message
    return row


def collect(case, tmp, event, cont, bound_ms, failures, go_on, exited):
    rows = []
    for rank in range(case.np):
        if case.fault == "kill" and rank in case.h2:
            continue
        text = read(tmp, f"result.{rank}")
        if text is None:
            failures.append(f"rank {rank} wrote no result")
            continue
        r = parse(text)
        stopped = case.fault == "stop" and rank in case.h2
        origin = cont if stopped else event
        verdict_ms = (int(r["at_ns"]) - origin) / 1e6 if int(r["at_ns"]) > 0 else -1
        row = dict(case=case.name, rank=rank, host="h1" if rank in case.h1 else "h2",
                   code=r["code"], verdict_ms=round(verdict_ms), later=r["later"],
                   shutdown_ms=float(r["shutdown_ms"]), iterations=int(r["iterations"]),
                   wrong=int(r["wrong"]), message=r["message"], from_="SIGCONT" if stopped else
                   "start" if case.soak else "disruption")
        rows.append(row)
        check(case, row, bound_ms, failures)
    return rows


def check(case, row, bound_ms, failures):
    who = f"rank {row['rank']} ({row['host']})"
    if row["wrong"]:
        failures.append(f"{who}: {row['wrong']} wrong elements")
    if case.soak:
        if row["code"] != "KOLO_OK" or row["later"] != "KOLO_OK":
            failures.append(f"{who}: a false alarm: {row['code']} / later {row['later']}: "
                            f"{row['message']}")
        return
    if case.phase == "shutdown":
        ok = ("KOLO_OK", "KOLO_ERR_SHUTDOWN", "KOLO_ERR_RANK_FAILED")
        if row["code"] not in ok:
            failures.append(f"{who}: kolo_shutdown gave {row['code']}: {row['message']}")
    else:
        if row["code"] != "KOLO_ERR_RANK_FAILED":
            failures.append(f"{who}: {row['code']}, expected KOLO_ERR_RANK_FAILED: "
                            f"{row['message']}")
        other = case.h2 if row["host"] == "h1" else case.h1
        if not any(re.search(rf"\brank {o}\b", row["message"]) for o in other):
            failures.append(f"{who}: the message names no rank of the other host: "
                            f"{row['message']}")
        if row["later"] != "KOLO_ERR_RANK_FAILED" and case.phase != "init":
            failures.append(f"{who}: an allreduce after the links healed gave {row['later']}")
        if case.phase == "init" and row["later"] not in ("KOLO_ERR_RANK_FAILED",
                                                           "KOLO_ERR_NOT_INITIALIZED",
                                                           "KOLO_ERR_SHUTDOWN"):
            failures.append(f"{who}: an allreduce after a failed init gave {row['later']}")
    if row["verdict_ms"] < 0 or row["verdict_ms"] > bound_ms:
        failures.append(f"{who}: verdict {row['verdict_ms']} ms after the {row['from_']} "
                        f"(bound {bound_ms} ms)")
    if row["shutdown_ms"] > bound_ms:
        failures.append(f"{who}: kolo_shutdown took {row['shutdown_ms']:.0f} ms "
                        f"(bound {bound_ms} ms)")


def inside(args):
    """In the cluster's switch namespace: every case, one after another."""
    failed, all_rows, notes = [], [], []
    port = 20000 + 2 * (os.getpid() % 4000)  # 2 per case: MASTER_PORT and the store's
    for name in args.cases:
        case = Case(name, args.world)
        t0 = time.monotonic()
        port += 2
        rows, failures = run_case(case, args, notes, port)
        all_rows += rows
        took = time.monotonic() - t0
        for row in rows:
            print(f"{row['case']:<26} rank={row['rank']} {row['host']} {row['code']:<22} "
                  f"verdict_ms={row['verdict_ms']:<6} (from the {row['from_']}) "
                  f"later={row['later']} shutdown_ms={row['shutdown_ms']:.0f} "
                  f"iterations={row['iterations']}", flush=True)
        status = "FAIL" if failures else "ok"
        print(f"{name}: {status} ({took:.1f} s)", flush=True)
        for f in failures:
            print("  " + f.replace("\n", "\n  "), flush=True)
        if failures:
            failed.append(name)
    for n in notes:
        print("note: " + n)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(all_rows, f, indent=1)
    if failed:
        print("failed: " + " ".join(failed))
        return 1
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("cases", nargs="*")
    p.add_argument("--cluster", help="tools/pretend_cluster.sh")
    p.add_argument("--probe", help="host_failure_probe")
    p.add_argument("--ci", action="store_true", help="the cases CI runs (every group but soak)")
    p.add_argument("--group", choices=sorted(GROUPS) + sorted(SOCKET_GROUPS),
                   help="one group of cases (socket.*: with --world socket)")
    p.add_argument("--world", choices=("mpi", "socket"), default="mpi",
                   help="which kolo world the ranks form (WORLDS above)")
    p.add_argument("--list", action="store_true")
    p.add_argument("--all", action="store_true", help="with --list or alone: the full matrix")
    p.add_argument("--timeout", type=float, default=2.0, help="KOLO_PEER_TIMEOUT_SECONDS")
    p.add_argument("--rate", default="10gbit", help="the links' rate outside slowlink")
    p.add_argument("--soak-iterations", type=int, default=600,
                   help="allreduces per soak case (the issue's full run: 10000)")
    p.add_argument("--slow-iterations", type=int, default=100,
                   help="allreduces of slowlink where netem delays (100 ms) and drops (5 %%): "
                        "each small one costs a few round trips (the full run: 10000)")
    p.add_argument("--soak-limit", type=float, default=600, help="seconds a soak may take")
    p.add_argument("--start-limit", type=float, default=60)
    p.add_argument("--stacks", action="store_true", help="gdb backtraces of hung ranks")
    p.add_argument("--json", help="write every row here")
    p.add_argument("--verbose", action="store_true", help="print each job's output")
    p.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.ci:
        args.cases += SOCKET_GROUPS["socket.ci"] if args.world == "socket" else CI_CASES
    if args.group:
        if args.group.startswith("socket.") != (args.world == "socket"):
            p.error(f"group {args.group} is for the {'socket' if args.world == 'mpi' else 'mpi'} world")
        args.cases += (SOCKET_GROUPS if args.world == "socket" else GROUPS)[args.group]
    if args.all and not args.list:
        args.cases += all_cases(args.world)
    if args.list:
        ci = SOCKET_GROUPS["socket.ci"] if args.world == "socket" else CI_CASES
        print("\n".join(all_cases(args.world) if args.all else ci))
        return 0
    if not args.cases:
        p.error("no cases (name some, or --ci, or --all)")
    try:
        for name in args.cases:
            Case(name, args.world)
    except ValueError as e:
        p.error(str(e))
    if args.inside:
        return inside(args)
    if not args.cluster or not args.probe:
        p.error("--cluster and --probe are needed")
    # One cluster for every case; this script again, inside it.
    limit = 120 + len(args.cases) * (args.timeout + 60) + \
        sum(args.soak_limit for c in args.cases if Case(c).soak)
    inner = [sys.executable, os.path.abspath(__file__), "--inside", "--world", args.world, "--probe",
             os.path.abspath(args.probe), "--timeout", str(args.timeout), "--rate", args.rate,
             "--soak-iterations", str(args.soak_iterations), "--slow-iterations",
             str(args.slow_iterations), "--soak-limit",
             str(args.soak_limit), "--start-limit", str(args.start_limit)]
    inner += ["--stacks"] * args.stacks + ["--verbose"] * args.verbose
    inner += ["--json", os.path.abspath(args.json)] if args.json else []
    cmd = [args.cluster, "--hosts", "2", "--rate", args.rate, "--timeout", str(int(limit))]
    cmd += ["--command", "--"] + inner + args.cases
    return subprocess.call(cmd)


if __name__ == "__main__":
    sys.exit(main())
