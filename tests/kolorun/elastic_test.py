#!/usr/bin/python3
"""Tests of kolorun --elastic (tools/kololaunch: discovery, registry, service,
elastic_driver) and of kolo.elastic's side of its protocol.

Unit tests: discovery's output and host order, blacklisting and its cooldown, the
registry's decisions, the service's token and the names both sides use, the
command line. Then real elastic jobs of elastic_worker.py (kolo.elastic.run over a
pretend world: no libkolo, see its docstring) on pretend hosts 127.0.0.N of this
machine, one per scenario of issue 31: a host added at epoch 1 and removed at
epoch 2; a rank that exits, raises, is killed or stops; every rank failing; below
--min-np past --elastic-timeout; the reset limit; a blacklisted host back after
its cooldown. For each, the size, ranks and generation of every rank's every
epoch, and the number of re-formations.

usage: elastic_test.py KOLORUN [unittest args]
"""
import http.client
import importlib.machinery
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
KOLORUN = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "../../tools/kolorun.py")
del sys.argv[1:2]
_loader = importlib.machinery.SourceFileLoader("kolorun", KOLORUN)
kr = importlib.util.module_from_spec(importlib.util.spec_from_loader("kolorun", _loader))
_loader.exec_module(kr)
from kololaunch import discovery, names, registry, service  # noqa: E402 (kolorun's path)

sys.path.insert(0, os.path.join(HERE, "..", "..", "bindings", "python"))
from kolo.elastic import _driver  # noqa: E402

WORKER = os.path.join(HERE, "elastic_worker.py")
PYTHON = "/usr/bin/python3"
PATH = {"PATH": "/usr/bin:/bin"}


class Discovery(unittest.TestCase):
    def test_output(self):
        self.assertEqual(discovery.parse_discovery_output("a:4\n\n b \nc:1\n", 2),
                         {"a": 4, "b": 2, "c": 1})
        self.assertEqual(discovery.parse_discovery_output("", 2), {})

    def test_bad_output(self):
        for text, want in (("a:x", "printed 'a:x': expected HOST or HOST:SLOTS"),
                           ("a:0", "printed 'a:0'"), ("-a", "printed '-a'"),
                           ("a b", "printed 'a b'"),
                           ("a", "printed 'a' without slots: give --slots N")):
            with self.subTest(text=text), self.assertRaisesRegex(discovery.DiscoveryError, want):
                discovery.parse_discovery_output(text, None)

    def test_script(self):
        self.assertEqual(discovery.DiscoveryScript("printf 'a:2\\nb\\n'", 3).find(),
                         {"a": 2, "b": 3})
        with self.assertRaisesRegex(discovery.DiscoveryError, "exited with status 4: no hosts"):
            discovery.DiscoveryScript("echo no hosts >&2; exit 4", 1).find()

    def test_order_and_changes(self):
        m = discovery.HostManager()
        self.assertEqual(m.update({"a": 2, "b": 2}), names.UPDATE_ADDED)
        self.assertEqual(m.update({"a": 2, "b": 2}), 0)
        # A new host goes last; one gone keeps the others' order.
        self.assertEqual(m.update({"c": 1, "b": 2, "a": 2}), names.UPDATE_ADDED)
        self.assertEqual(m.current(), [("a", 2), ("b", 2), ("c", 1)])
        self.assertEqual(m.update({"c": 1, "b": 2}), names.UPDATE_REMOVED)
        self.assertEqual(m.current(), [("b", 2), ("c", 1)])
        self.assertEqual(m.update({"c": 1, "b": 1, "a": 2}),
                         names.UPDATE_ADDED | names.UPDATE_REMOVED)
        self.assertEqual(m.current(), [("b", 1), ("c", 1), ("a", 2)])

    def test_blacklisted_for_good_without_a_cooldown(self):
        now = [100.0]
        m = discovery.HostManager(clock=lambda: now[0])
        m.update({"a": 1, "b": 1})
        m.blacklist("a")
        self.assertEqual(m.current(), [("b", 1)])
        now[0] += 10 ** 6
        self.assertEqual(m.update({"a": 1, "b": 1}), 0)
        self.assertEqual(m.current(), [("b", 1)])

    def test_cooldown_doubles_and_the_host_comes_back_last(self):
        now = [100.0]
        m = discovery.HostManager((10, 100), rng=lambda: 0.5, clock=lambda: now[0])
        m.update({"a": 1, "b": 1})
        m.blacklist("a")  # 10 * 2 + 0.5 * 10 = 25 s
        now[0] += 24
        self.assertEqual(m.update({"a": 1, "b": 1}), 0)
        now[0] += 1
        self.assertEqual(m.update({"a": 1, "b": 1}), names.UPDATE_ADDED)
        self.assertEqual(m.current(), [("b", 1), ("a", 1)])
        m.blacklist("a")  # 10 * 4 + 5 = 45 s
        now[0] += 44
        self.assertEqual(m.update({"a": 1, "b": 1}), 0)
        now[0] += 1
        self.assertEqual(m.update({"a": 1, "b": 1}), names.UPDATE_ADDED)
        for _ in range(3):
            m.blacklist("a")
            now[0] += 100  # clamped to the range's 100 s
            self.assertEqual(m.update({"a": 1, "b": 1}), names.UPDATE_ADDED)

    def test_cooldown_range_bounds(self):
        for low, high in ((0, 5), (5, 4), (1, 3601)):
            with self.assertRaisesRegex(kr.UsageError, "1 <= MIN <= MAX <= 3600"):
                discovery.check_cooldown_range(low, high)


class Registry(unittest.TestCase):
    def reg(self, states):
        r = registry.Registry(3, list(states))
        for key, state in states.items():
            if state:
                self.assertTrue(r.record(key, state, 1.0))
        return r

    def decide(self, states, blacklisted=(), resets=0, limit=None):
        return registry.decide(self.reg(states), lambda k: k.split(":")[0],
                               lambda h, bad: h in bad or h in blacklisted, resets, limit)

    def test_records(self):
        r = registry.Registry(0, ["a:0", "a:1"])
        self.assertFalse(r.record("b:0", registry.READY))
        self.assertTrue(r.record("a:0", registry.READY, 5.0))
        self.assertFalse(r.record("a:0", registry.SUCCESS))
        self.assertTrue(r.record("a:0", registry.FAILURE, 6.0))  # died while re-forming
        self.assertEqual((r.first_record, r.first_trouble, r.missing(), r.complete()),
                         (5.0, 5.0, ["a:1"], False))
        self.assertTrue(r.record("a:1", registry.READY))
        self.assertTrue(r.complete())

    def test_a_finished_worker_is_no_trouble(self):
        r = registry.Registry(0, ["a:0", "a:1"])
        self.assertTrue(r.record("a:0", registry.SUCCESS, 5.0))
        self.assertEqual((r.first_record, r.first_trouble), (5.0, None))
        self.assertTrue(r.record("a:1", registry.FAILURE, 7.0))
        self.assertEqual(r.first_trouble, 7.0)

    def test_horovods_rules_in_order(self):
        R, S, F = registry.READY, registry.SUCCESS, registry.FAILURE
        self.assertEqual(self.decide({"a:0": S, "b:0": F}), ("finish", None, []))
        self.assertEqual(self.decide({"a:0": F, "b:0": F}),
                         ("fail", "every worker of generation 3 failed", []))
        self.assertEqual(self.decide({"a:0": F, "a:1": R}),
                         ("fail", "every host of generation 3 has a failed worker (a)", ["a"]))
        self.assertEqual(self.decide({"a:0": R, "b:0": R}, blacklisted=("a", "b"))[0], "fail")
        self.assertEqual(self.decide({"a:0": R, "b:0": F}, resets=2, limit=2),
                         ("fail", "the job re-formed 2 times, the --reset-limit; it ends at the "
                                  "next failure or host change", ["b"]))
        self.assertEqual(self.decide({"a:0": R, "b:0": F}, resets=1, limit=2),
                         ("reform", None, ["b"]))
        self.assertEqual(self.decide({"a:0": R, "b:0": R}), ("reform", None, []))


class Protocol(unittest.TestCase):
    def test_both_sides_use_the_same_names(self):
        for name in ("KOLO_ELASTIC_ADDR", "KOLO_ELASTIC_PORT", "KOLO_JOB_TOKEN", "KOLO_GENERATION",
                     "HOROVOD_HOSTNAME", "HOROVOD_LOCAL_RANK", "TOKEN_HEADER", "PATH_READY",
                     "PATH_ASSIGNMENT", "PATH_UPDATES", "PATH_STATUS", "UPDATE_REMOVED",
                     "UPDATE_ADDED"):
            self.assertEqual(getattr(_driver, name), getattr(names, name), name)

    def test_the_service_wants_the_token(self):
        class Driver:
            def status(self):
                return {"generation": 7}
        svc = service.Service(Driver(), "127.0.0.1", "secret")
        svc.start()
        try:
            good = _driver.DriverClient("127.0.0.1", svc.port, "secret")
            self.assertEqual(good.status(), {"generation": 7})
            with self.assertRaisesRegex(_driver.ElasticDriverError, "HTTP 403 .*wrong job token"):
                _driver.DriverClient("127.0.0.1", svc.port, "guess").status()
            conn = http.client.HTTPConnection("127.0.0.1", svc.port, timeout=5)
            conn.request("POST", names.PATH_READY, b"{not json", {names.TOKEN_HEADER: "secret"})
            self.assertEqual(conn.getresponse().status, 400)
            conn.close()
        finally:
            svc.stop()
        with self.assertRaisesRegex(_driver.ElasticDriverError, "cannot|refused"):
            good.status()


class CommandLine(unittest.TestCase):
    def run_kolorun(self, args, env=None):
        return subprocess.run([KOLORUN] + args, capture_output=True, text=True, timeout=60,
                              env=dict(PATH, **(env or {})))

    def test_dry_run(self):
        result = self.run_kolorun(["--dry-run", "--elastic", "-H", "a:2,b:1", "--min-np", "2",
                                   "--max-np", "3", "--reset-limit", "4", "true"])
        self.assertEqual((result.returncode, result.stderr), (0, ""))
        self.assertEqual(result.stdout.splitlines(), [
            "elastic job: -np 3, --min-np 2, --max-np 3, --reset-limit 4, --elastic-timeout "
            "600 s; hosts from fixed hosts a:2,b:1",
            "generation 0: a:0 rank 0 (local rank 0)", "generation 0: a:1 rank 1 (local rank 1)",
            "generation 0: b:0 rank 2 (local rank 0)"])
        result = self.run_kolorun(["--dry-run", "-np", "2", "--host-discovery-script", "./d.sh",
                                   "--slots-per-host", "2", "--blacklist-cooldown-range", "5",
                                   "60", "true"], {"HOROVOD_ELASTIC_TIMEOUT": "30"})
        self.assertEqual(result.stdout, "elastic job: -np 2, --min-np 2, --max-np none, "
                         "--reset-limit none, --elastic-timeout 30 s; hosts from discovery "
                         "script './d.sh' every 1 s\n")

    ERRORS = [
        (["--elastic", "--world", "mpi", "-np", "2"], "--elastic needs --world socket: MPICH "
         "cannot re-form a world in process (MPIX_Comm_shrink is a stub in MPICH 4.0.2)"),
        (["-np", "2", "--max-np", "4"], "--max-np is for elastic jobs: add --elastic"),
        (["-np", "2", "--reset-limit", "1"], "--reset-limit is for elastic jobs: add --elastic"),
        (["--elastic", "-np", "2", "--blacklist-cooldown-range", "0", "5"],
         "--blacklist-cooldown-range 0 5: expected MIN MAX seconds with 1 <= MIN <= MAX <= 3600"),
        (["--elastic", "-np", "2", "--blacklist-cooldown-range", "5"],
         "--blacklist-cooldown-range '5 true': expected MIN MAX, two whole numbers of seconds"),
        (["--elastic", "-np", "2", "--min-np", "3"], "--min-np 3 is more than -np 2"),
        (["--elastic", "-np", "2", "--max-np", "1"], "--max-np 1 is less than -np 2"),
        (["--elastic", "-np", "2", "--elastic-timeout", "0"],
         "--elastic-timeout '0': expected a number of seconds > 0"),
        (["--elastic", "-np", "2", "--reset-limit", "-1"],
         "--reset-limit '-1': expected a number of re-formations >= 0"),
        (["--host-discovery-script", "d.sh"],
         "--elastic with a discovery script needs -np (or --min-np)"),
        (["--elastic", "--host-discovery-script", "d.sh", "-H", "a", "-np", "1"],
         "give --host-discovery-script or -H/--hostfile, not both"),
        (["--elastic", "--mpi-args", "-v", "-np", "1"],
         "--mpi-args is mpiexec's: not for the socket world (--world socket or --elastic)"),
    ]

    def test_errors(self):
        for args, want in self.ERRORS:
            with self.subTest(args=args):
                result = self.run_kolorun(["--dry-run"] + args + ["true"])
                self.assertEqual((result.returncode, result.stdout, result.stderr),
                                 (2, "", "kolorun: " + want + "\n"))


class ElasticJobs(unittest.TestCase):
    """Real elastic jobs of elastic_worker.py on pretend hosts 127.0.0.N."""

    def job(self, flags, epochs, actions, hosts_text=None, steps=4, timeout=120):
        """(exit status, stderr, rows): rows are (epoch, generation, size, rank, slot,
        resets) of every rank's every finished epoch, sorted."""
        with tempfile.TemporaryDirectory() as tmp:
            hosts = os.path.join(tmp, "hosts")
            if hosts_text is not None:
                with open(hosts, "w") as f:
                    f.write(hosts_text.replace(",", "\n") + "\n")
                flags = flags + ["--host-discovery-script", "cat " + hosts]
            log = os.path.join(tmp, "log")
            argv = [KOLORUN, "--elastic"] + flags + [PYTHON, WORKER, log, str(epochs),
                                                     str(steps)]
            argv += [a.replace("HOSTS", hosts) for a in actions]
            done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                                  env=PATH, cwd=tmp)
            rows = []
            if os.path.exists(log):
                with open(log) as f:
                    rows = sorted((d["epoch"], d["generation"], d["size"], d["rank"], d["slot"],
                                   d["resets"]) for d in map(json.loads, f))
        return done.returncode, done.stderr, rows

    def assertRows(self, rows, want):
        self.assertEqual(rows, sorted(want))

    def test_a_host_added_at_epoch_1_and_removed_at_epoch_2(self):
        two = "127.0.0.1:2,127.0.0.2:2"
        status, err, rows = self.job(["-np", "2"], 4, [
            "0:0:1:0:hosts=HOSTS=" + two, "0:0:1:1:await-update",
            "1:0:2:0:hosts=HOSTS=127.0.0.1:2", "1:0:2:1:await-update"], "127.0.0.1:2")
        self.assertEqual(status, 0, err)
        a0, a1, b0, b1 = "127.0.0.1:0", "127.0.0.1:1", "127.0.0.2:0", "127.0.0.2:1"
        self.assertRows(rows, [
            (0, 0, 2, 0, a0, 0), (0, 0, 2, 1, a1, 0), (1, 0, 2, 0, a0, 0), (1, 0, 2, 1, a1, 0),
            (2, 1, 4, 0, a0, 1), (2, 1, 4, 1, a1, 1), (2, 1, 4, 2, b0, 0), (2, 1, 4, 3, b1, 0),
            (3, 2, 2, 0, a0, 2), (3, 2, 2, 1, a1, 2)])
        self.assertIn("kolo.elastic: 127.0.0.2:0 is no longer in the job (generation 1)", err)

    def failure_on_the_second_host(self, what):
        """Rank 3 (on the second host) does `what` in epoch 1: that host is blacklisted,
        epoch 1 is done again by the first host's ranks, which keep theirs."""
        status, err, rows = self.job(["-H", "127.0.0.1:2,127.0.0.2:2", "--min-np", "2"], 3,
                                     ["0:3:1:2:" + what])
        self.assertEqual(status, 0, err)
        a0, a1, b0, b1 = "127.0.0.1:0", "127.0.0.1:1", "127.0.0.2:0", "127.0.0.2:1"
        self.assertRows(rows, [
            (0, 0, 4, 0, a0, 0), (0, 0, 4, 1, a1, 0), (0, 0, 4, 2, b0, 0), (0, 0, 4, 3, b1, 0),
            (1, 1, 2, 0, a0, 1), (1, 1, 2, 1, a1, 1), (2, 1, 2, 0, a0, 1), (2, 1, 2, 1, a1, 1)])
        self.assertIn("kolorun: host 127.0.0.2 is blacklisted: a worker failed there", err)
        return err

    def test_a_rank_that_exits(self):
        err = self.failure_on_the_second_host("exit3")
        self.assertIn("kolorun: 127.0.0.2:1 (rank 3 of generation 0) exited with status 3", err)

    def test_a_rank_killed_mid_batch(self):
        err = self.failure_on_the_second_host("kill")
        self.assertIn("(rank 3 of generation 0) exited with status 137", err)

    def test_a_rank_that_raises(self):
        err = self.failure_on_the_second_host("raise")
        self.assertIn("RuntimeError: pretend: a bug in the training script", err)

    def test_rank_0_fails_and_the_survivors_take_new_ranks(self):
        status, err, rows = self.job(["-H", "127.0.0.1:1,127.0.0.2:2", "--min-np", "1"], 2,
                                     ["0:0:1:1:exit5"])
        self.assertEqual(status, 0, err)
        a0, b0, b1 = "127.0.0.1:0", "127.0.0.2:0", "127.0.0.2:1"
        self.assertRows(rows, [(0, 0, 3, 0, a0, 0), (0, 0, 3, 1, b0, 0), (0, 0, 3, 2, b1, 0),
                               (1, 1, 2, 0, b0, 1), (1, 1, 2, 1, b1, 1)])

    def test_a_stopped_rank_is_stopped_for_good_after_the_timeout(self):
        status, err, rows = self.job(
            ["-H", "127.0.0.1:1,127.0.0.2:1,127.0.0.3:1", "--min-np", "1",
             "--elastic-timeout", "3"], 2, ["0:1:1:0:stop", "0:2:1:1:exit3"])
        self.assertEqual(status, 0, err)
        self.assertIn("kolorun: 127.0.0.2:0 did not re-form within 3 s (--elastic-timeout): "
                      "stopping it, counted as failed", err)
        self.assertEqual([r for r in rows if r[0] == 1], [(1, 1, 1, 0, "127.0.0.1:0", 1)])

    def test_a_slow_last_rank_is_waited_for(self):
        # Rank 0 ends 4 s after rank 1, past the --elastic-timeout of 2 s.
        status, err, rows = self.job(["-H", "127.0.0.1:1,127.0.0.2:1", "--elastic-timeout",
                                      "2"], 1, ["0:0:1:0:sleep4"])
        self.assertEqual((status, len(rows)), (0, 2), err)

    def test_a_discovery_script_that_fails_at_once(self):
        with tempfile.TemporaryDirectory() as tmp:
            done = subprocess.run([KOLORUN, "--elastic", "-np", "1", "--host-discovery-script",
                                   "exit 3", "true"], capture_output=True, text=True,
                                  timeout=60, env=PATH, cwd=tmp)
        self.assertEqual((done.returncode, done.stderr),
                         (1, "kolorun: discovery script 'exit 3' exited with status 3\n"))

    def test_every_rank_failing_fails_the_job(self):
        status, err, rows = self.job(["-H", "127.0.0.1:1,127.0.0.2:1"], 3,
                                     ["0:0:1:0:exit3", "0:1:1:0:exit4"])
        self.assertEqual(status, 1)
        self.assertIn("kolorun: the elastic job failed: every worker of generation 0 failed", err)
        self.assertEqual(len(rows), 2)

    def test_below_min_np_past_the_timeout(self):
        status, err, _ = self.job(["-H", "127.0.0.1:1,127.0.0.2:1", "--min-np", "2",
                                   "--elastic-timeout", "2"], 3, ["0:1:1:0:exit3"])
        self.assertEqual(status, 1)
        self.assertIn("kolorun: the elastic job failed: fewer than 2 slots (--min-np) for 2 s "
                      "(--elastic-timeout); available: 127.0.0.1:1", err)

    def test_the_reset_limit(self):
        status, err, rows = self.job(["-H", "127.0.0.1:1,127.0.0.2:1,127.0.0.3:1", "--min-np",
                                      "1", "--reset-limit", "1"], 4,
                                     ["0:2:1:0:exit3", "1:1:2:0:exit3"])
        self.assertEqual(status, 1)
        self.assertIn("kolorun: the elastic job failed: the job re-formed 1 times, the "
                      "--reset-limit", err)
        self.assertEqual(max(r[1] for r in rows), 1)

    def test_a_blacklisted_host_returns_after_its_cooldown(self):
        status, err, rows = self.job(["-H", "127.0.0.1:1,127.0.0.2:1", "--min-np", "1",
                                      "--blacklist-cooldown-range", "1", "1"], 4,
                                     ["0:1:0:1:exit3", "1:0:1:0:await-update"])
        self.assertEqual(status, 0, err)
        a0, b0 = "127.0.0.1:0", "127.0.0.2:0"
        self.assertRows(rows, [(0, 1, 1, 0, a0, 1), (1, 1, 1, 0, a0, 1), (2, 2, 2, 0, a0, 2),
                               (2, 2, 2, 1, b0, 0), (3, 2, 2, 0, a0, 2), (3, 2, 2, 1, b0, 0)])


if __name__ == "__main__":
    unittest.main()
