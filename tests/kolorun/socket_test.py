#!/usr/bin/python3
"""Tests of kolorun's socket world (tools/kololaunch: slots, static_job, processes):
rank assignment, where the master is, the world kolorun picks, the exact
per-worker environment --dry-run prints, the errors (one line, exit 2), and real
runs at 2 ranks of a script that reports the environment it got (kolo's socket
world itself is tested with libkolo: issue 29), a failing rank, signals, output
labels, and ranks on "other hosts" through --launcher-exec.

usage: socket_test.py KOLORUN [unittest args]
"""
import importlib.machinery
import importlib.util
import json
import os
import re
import signal
import stat
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
KOLORUN = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "../../tools/kolorun.py")
del sys.argv[1:2]
_loader = importlib.machinery.SourceFileLoader("kolorun", KOLORUN)
kr = importlib.util.module_from_spec(importlib.util.spec_from_loader("kolorun", _loader))
_loader.exec_module(kr)
from kololaunch import names, processes, slots, static_job  # noqa: E402 (kolorun's path)

PATH = {"PATH": "/usr/bin:/bin"}
PYTHON = "/usr/bin/python3"
# Prints, as one JSON line, the variables a worker got (and whether PMI_RANK leaked).
# One write per line: the ranks share kolorun's stdout (print() under PYTHONUNBUFFERED
# writes the text and its newline apart).
REPORT = ("import json, os, sys; sys.stdout.write(json.dumps({k: v for k, v in "
          "os.environ.items() if k in %r}) + '\\n')" % sorted(
              [v for k, v in vars(names).items() if k.isupper() and isinstance(v, str)
               and v.isupper() and "_" in v] + ["RANK", "FOO", "KOLO_CYCLE_TIME_MS",
                                                 "PMI_RANK", "FAKE_HOST"]))


def run_kolorun(args, env=None, timeout=60):
    return subprocess.run([KOLORUN] + args, capture_output=True, text=True, timeout=timeout,
                          env=dict(PATH, **(env or {})))


class Slots(unittest.TestCase):
    def test_horovods_assignment(self):
        got = slots.assign_slots([("a", 2), ("b", 2), ("c", 1)])
        self.assertEqual([(s.host, s.rank, s.local_rank, s.cross_rank, s.size, s.local_size,
                           s.cross_size, s.group_rank, s.group_size) for s in got], [
            ("a", 0, 0, 0, 5, 2, 3, 0, 3), ("a", 1, 1, 0, 5, 2, 2, 0, 3),
            ("b", 2, 0, 1, 5, 2, 3, 1, 3), ("b", 3, 1, 1, 5, 2, 2, 1, 3),
            ("c", 4, 0, 2, 5, 1, 3, 2, 3)])
        self.assertEqual([s.key for s in got], ["a:0", "a:1", "b:0", "b:1", "c:0"])

    def test_max_np_takes_the_first_slots(self):
        got = slots.assign_slots([("a", 2), ("b", 2), ("c", 1)], max_np=3)
        self.assertEqual([(s.key, s.size, s.local_size, s.cross_size, s.group_size) for s in got],
                         [("a:0", 3, 2, 2, 2), ("a:1", 3, 2, 1, 2), ("b:0", 3, 1, 2, 2)])
        self.assertEqual(slots.assign_slots([("a", 2)], max_np=0), [])

    def test_slot_env_is_torchruns_and_horovodruns(self):
        env = slots.slot_env(slots.assign_slots([("a", 1), ("b", 2)])[2])
        self.assertEqual(env, {
            "RANK": "2", "WORLD_SIZE": "3", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2",
            "GROUP_RANK": "1", "GROUP_WORLD_SIZE": "2", "ROLE_RANK": "2", "ROLE_WORLD_SIZE": "3",
            "ROLE_NAME": "default", "HOROVOD_HOSTNAME": "b", "HOROVOD_RANK": "2",
            "HOROVOD_SIZE": "3", "HOROVOD_LOCAL_RANK": "1", "HOROVOD_LOCAL_SIZE": "2",
            "HOROVOD_CROSS_RANK": "0", "HOROVOD_CROSS_SIZE": "1"})


class Master(unittest.TestCase):
    def test_every_rank_here(self):
        placed = slots.assign_slots([("localhost", 2)])
        addr, port, store = static_job.master(placed)
        self.assertEqual(addr, "127.0.0.1")
        self.assertNotEqual(port, store)
        self.assertEqual(static_job.master(placed, 4000), ("127.0.0.1", 4000, 4001))

    def test_rank0_elsewhere(self):
        placed = slots.assign_slots([("a", 1), ("localhost", 1)])
        self.assertEqual(static_job.master(placed), ("a", 29500, 29501))
        self.assertEqual(static_job.master(placed, 4000), ("a", 4000, 4001))
        self.assertEqual(static_job.master(placed, 4000, offered=[7, 8]), ("a", 7, 8))

    def test_rank0_here_others_elsewhere(self):
        placed = slots.assign_slots([("127.0.0.1", 1), ("b", 1)])
        self.assertEqual(static_job.master(placed, 4000, "10.0.0.9"), ("10.0.0.9", 4000, 4001))

    def test_local_hosts(self):
        for name in ("localhost", "127.0.0.1", "127.0.0.2", "::1", processes.socket.gethostname()):
            self.assertTrue(processes.is_local_host(name), name)
        for name in ("a", "10.0.0.1", "127.0.0.x", "localhost2"):
            self.assertFalse(processes.is_local_host(name), name)


class WorldChoice(unittest.TestCase):
    def test_auto_is_mpi_with_mpiexec_on_path(self):
        result = run_kolorun(["--dry-run", "-np", "2", "true"])
        self.assertEqual(result.stdout, "mpiexec.mpich -bind-to core -n 2 true\n")

    def test_auto_is_socket_without_mpiexec(self):
        with tempfile.TemporaryDirectory() as empty:
            result = run_kolorun(["--dry-run", "--verbose", "-np", "1", "/bin/true"],
                                 {"PATH": empty})
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("KOLO_WORLD=socket", result.stdout)
        self.assertIn("mpiexec.mpich is not on PATH: the socket world", result.stderr)

    def test_an_mpiexec_option_keeps_mpi(self):
        result = run_kolorun(["--dry-run", "-np", "2", "--mpi-args", "-v", "true"])
        self.assertEqual(result.stdout, "mpiexec.mpich -v -bind-to core -n 2 true\n")

    def test_prepend_rank_in_the_mpi_world(self):
        result = run_kolorun(["--dry-run", "-np", "2", "--prepend-rank", "true"])
        self.assertEqual(result.stdout, "mpiexec.mpich -bind-to core -prepend-rank -n 2 true\n")


class SocketDryRun(unittest.TestCase):
    SHARED = ("KOLO_WORLD=socket 'KOLO_JOB_TOKEN=<token>' MASTER_ADDR=%s MASTER_PORT=4000 "
              "KOLO_STORE_PORT=4001 KOLO_GENERATION=0")

    def slot(self, rank, size, local, local_size, group, groups, host, cross, cross_size):
        return ("RANK=%d WORLD_SIZE=%d LOCAL_RANK=%d LOCAL_WORLD_SIZE=%d GROUP_RANK=%d "
                "GROUP_WORLD_SIZE=%d ROLE_RANK=%d ROLE_WORLD_SIZE=%d ROLE_NAME=default "
                "HOROVOD_HOSTNAME=%s HOROVOD_RANK=%d HOROVOD_SIZE=%d HOROVOD_LOCAL_RANK=%d "
                "HOROVOD_LOCAL_SIZE=%d HOROVOD_CROSS_RANK=%d HOROVOD_CROSS_SIZE=%d" % (
                    rank, size, local, local_size, group, groups, rank, size, host, rank, size,
                    local, local_size, cross, cross_size))

    def test_this_host(self):
        result = run_kolorun(["--dry-run", "--world", "socket", "-np", "2", "--master-port",
                              "4000", "--cycle-time-ms", "3", "-x", "FOO=a b", "true", "x"])
        self.assertEqual((result.returncode, result.stderr), (0, ""))
        shared = "KOLO_CYCLE_TIME_MS=3 'FOO=a b' " + self.SHARED % "127.0.0.1"
        self.assertEqual(result.stdout.splitlines(), [
            "rank 0 on localhost (this host): %s %s true x" % (
                shared, self.slot(0, 2, 0, 2, 0, 1, "localhost", 0, 1)),
            "rank 1 on localhost (this host): %s %s true x" % (
                shared, self.slot(1, 2, 1, 2, 0, 1, "localhost", 0, 1))])

    def test_other_hosts(self):
        result = run_kolorun(["--dry-run", "--world", "socket", "-H", "a:2,b:1", "--master-port",
                              "4000", "--launcher-exec", "/opt/enter", "true"])
        self.assertEqual((result.returncode, result.stderr), (0, ""))
        shared = self.SHARED % "a"
        self.assertEqual(result.stdout.splitlines(), [
            "rank 0 on a (a via /opt/enter): %s %s true" % (
                shared, self.slot(0, 3, 0, 2, 0, 2, "a", 0, 2)),
            "rank 1 on a (a via /opt/enter): %s %s true" % (
                shared, self.slot(1, 3, 1, 2, 0, 2, "a", 0, 1)),
            "rank 2 on b (b via /opt/enter): %s %s true" % (
                shared, self.slot(2, 3, 0, 1, 1, 2, "b", 1, 2))])

    def test_ssh_by_default(self):
        result = run_kolorun(["--dry-run", "--world", "socket", "-H", "a,b", "true"])
        self.assertIn("rank 1 on b (b via ssh): ", result.stdout)


class SocketErrors(unittest.TestCase):
    CASES = [
        (["--world", "socket", "--mpi-args", "-v"],
         "--mpi-args is mpiexec's: not for the socket world (--world socket or --elastic)"),
        (["--world", "socket", "--bind-to", "numa"],
         "--bind-to is mpiexec's: not for the socket world (--world socket or --elastic)"),
        (["--world", "socket", "--launcher", "rsh"],
         "--launcher is mpiexec's: not for the socket world (--world socket or --elastic)"),
        (["--world", "mpi", "--master-port", "4000"],
         "--master-port is for the socket world: add --world socket"),
        (["--world", "socket", "-x", "KOLO_JOB_TOKEN=x"],
         "KOLO_JOB_TOKEN is kolorun's to set in the socket world (given by -x KOLO_JOB_TOKEN)"),
        (["--world", "socket", "--master-port", "70000"],
         "--master-port '70000': expected a port from 1 to 65534"),
        (["--world", "sockets"], "--world 'sockets': expected one of auto, mpi, socket"),
        (["--world", "socket"], "-np is needed when no hosts are given (-H, --hostfile or a "
                                "scheduler's allocation)"),
        (["--world", "socket", "-np", "3", "-H", "a:2"],
         "-np 3 is more than the 2 slots of a:2 (from -H)"),
    ]

    def test_one_line_and_exit_2(self):
        for args, want in self.CASES:
            with self.subTest(args=args):
                result = run_kolorun(["--dry-run"] + args + ["true"])
                self.assertEqual((result.returncode, result.stdout, result.stderr),
                                 (2, "", "kolorun: " + want + "\n"))


class SocketRuns(unittest.TestCase):
    """Real jobs: kolorun starts the ranks itself."""

    def run_job(self, args, env=None, timeout=60):
        return run_kolorun(["--world", "socket"] + args, env, timeout)

    def test_two_ranks_get_their_environment(self):
        result = self.run_job(["-np", "2", "--cycle-time-ms", "3", "-x", "FOO=a b", PYTHON, "-c",
                               REPORT], {"PMI_RANK": "5"})
        self.assertEqual((result.returncode, result.stderr), (0, ""))
        got = sorted((json.loads(line) for line in result.stdout.splitlines()),
                     key=lambda e: e["RANK"])
        self.assertEqual(len(got), 2)
        token, port, store = got[0]["KOLO_JOB_TOKEN"], got[0]["MASTER_PORT"], \
            got[0]["KOLO_STORE_PORT"]
        self.assertRegex(token, r"\A[0-9a-f]{64}\Z")
        self.assertNotEqual(port, store)
        for rank, env in enumerate(got):
            self.assertEqual(env, dict(slots.slot_env(slots.assign_slots([("localhost", 2)])[rank]),
                                       KOLO_WORLD="socket", KOLO_JOB_TOKEN=token,
                                       MASTER_ADDR="127.0.0.1", MASTER_PORT=port,
                                       KOLO_STORE_PORT=store, KOLO_GENERATION="0",
                                       KOLO_CYCLE_TIME_MS="3", FOO="a b"))
        again = self.run_job(["-np", "1", PYTHON, "-c", REPORT])
        self.assertNotEqual(json.loads(again.stdout)["KOLO_JOB_TOKEN"], token)

    def test_a_failing_rank_stops_the_others(self):
        # The others get SIGTERM (and say so), well before the SIGKILL after the grace.
        script = ("import os, signal, sys, time\n"
                  "def term(*_):\n"
                  "    sys.stdout.write('rank %s got SIGTERM\\n' % os.environ['RANK'])\n"
                  "    sys.exit(0)\n"
                  "signal.signal(signal.SIGTERM, term)\n"
                  "if os.environ['RANK'] == '1':\n"
                  "    time.sleep(1)\n"
                  "    sys.exit(3)\n"
                  "time.sleep(60)\n")
        start = time.monotonic()
        result = self.run_job(["-np", "3", PYTHON, "-c", script])
        self.assertEqual(result.returncode, 3)
        self.assertLess(time.monotonic() - start, processes.GRACE_SECONDS)
        self.assertEqual(sorted(result.stdout.splitlines()),
                         ["rank 0 got SIGTERM", "rank 2 got SIGTERM"])
        self.assertEqual(result.stderr, "kolorun: rank 1 on localhost exited with status 3; "
                                        "stopping the other ranks\n")

    def test_every_rank_succeeds(self):
        result = self.run_job(["-np", "2", "sh", "-c", "exit 0"])
        self.assertEqual((result.returncode, result.stdout, result.stderr), (0, "", ""))

    def test_prepend_rank(self):
        result = self.run_job(["-np", "2", "--prepend-rank", "sh", "-c",
                               'echo "out $RANK"; echo "err $RANK" >&2'])
        self.assertEqual(sorted(result.stdout.splitlines()), ["[0] out 0", "[1] out 1"])
        self.assertEqual(sorted(result.stderr.splitlines()), ["[0] err 0", "[1] err 1"])

    def test_signals_are_forwarded(self):
        script = ("import signal, sys, time\n"
                  "signal.signal(signal.SIGTERM, lambda *a: sys.exit(40))\n"
                  "sys.stdout.write('up\\n')\n"
                  "sys.stdout.flush()\n"
                  "time.sleep(60)\n")
        proc = subprocess.Popen([KOLORUN, "--world", "socket", "-np", "2", PYTHON, "-c", script],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=PATH)
        for _ in range(2):
            self.assertEqual(proc.stdout.readline(), "up\n")
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
        self.assertEqual(proc.returncode, 40, err)

    def test_no_worker_outlives_a_killed_kolorun(self):
        with tempfile.TemporaryDirectory() as tmp:
            script = "echo $$ > %s/pid.$RANK; exec sleep 60" % tmp
            proc = subprocess.Popen([KOLORUN, "--world", "socket", "-np", "2", "sh", "-c",
                                     script], env=PATH)
            pids = wait_for_files([os.path.join(tmp, "pid.%d" % r) for r in range(2)])
            proc.kill()
            proc.wait()
            deadline = time.monotonic() + processes.GRACE_SECONDS + 10
            while any(alive(p) for p in pids) and time.monotonic() < deadline:
                time.sleep(0.1)
            self.assertEqual([p for p in pids if alive(p)], [])

    def test_other_hosts_through_launcher_exec(self):
        with tempfile.TemporaryDirectory() as tmp:
            enter = os.path.join(tmp, "enter")
            with open(enter, "w") as f:  # as ssh: HOST, then one command for a shell
                f.write('#!/bin/sh\nhost=$1\nshift\necho "$*" >> %s/argv\n'
                        'FAKE_HOST=$host exec sh -c "$*"\n' % tmp)
            os.chmod(enter, stat.S_IRWXU)
            result = self.run_job(["-H", "h1:1,h2:1", "--master-port", "4000", "-x",
                                   "FOO=a 'b' $c\\", "--launcher-exec", enter, PYTHON, "-c",
                                   REPORT])
            with open(os.path.join(tmp, "argv")) as f:
                commands = f.read()
        self.assertEqual((result.returncode, result.stderr), (0, ""))
        token = json.loads(result.stdout.splitlines()[0])["KOLO_JOB_TOKEN"]
        self.assertNotIn(token, commands)  # the environment went through the pipe
        self.assertNotIn("MASTER_PORT=", commands)
        got = sorted((json.loads(line) for line in result.stdout.splitlines()),
                     key=lambda e: e["RANK"])
        self.assertEqual([(e["FAKE_HOST"], e["HOROVOD_HOSTNAME"], e["RANK"], e["MASTER_ADDR"],
                           e["MASTER_PORT"], e["KOLO_STORE_PORT"], e["FOO"]) for e in got],
                         [("h1", "h1", "0", "h1", "4000", "4001", "a 'b' $c\\"),
                          ("h2", "h2", "1", "h1", "4000", "4001", "a 'b' $c\\")])


def wait_for_files(paths, timeout=30):
    deadline = time.monotonic() + timeout
    while not all(os.path.exists(p) and os.path.getsize(p) for p in paths):
        if time.monotonic() > deadline:
            raise AssertionError("no %s after %d s" % (paths, timeout))
        time.sleep(0.05)
    pids = []
    for p in paths:
        with open(p) as f:
            pids.append(int(f.read()))
    return pids


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


if __name__ == "__main__":
    unittest.main()
