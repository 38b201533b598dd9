#!/usr/bin/python3
"""Tests of kolorun (tools/kolorun.py): the parsing functions one by one, each
scheduler's allocation from a fixture environment, the exact mpiexec commands
--dry-run prints, and the errors (one line, exit 2).

usage: kolorun_test.py KOLORUN [KOLO_INFO] [unittest args]
  KOLORUN    the built script (build/bin/kolorun): the command-line tests run it
  KOLO_INFO  kolo-info, to check that every knob kolo has is a kolorun flag
"""
import importlib.machinery
import importlib.util
import io
import json
import os
import stat
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "fixtures")
KOLORUN = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "../../tools/kolorun.py")
KOLO_INFO = sys.argv[2] if len(sys.argv) > 2 and not sys.argv[2].startswith("-") else None
del sys.argv[1:3 if KOLO_INFO else 2]

# The module under test, loaded from the built script (its name has no .py).
_loader = importlib.machinery.SourceFileLoader("kolorun", KOLORUN)
_spec = importlib.util.spec_from_loader("kolorun", _loader)
kr = importlib.util.module_from_spec(_spec)
_loader.exec_module(kr)

PATH = {"PATH": "/usr/bin:/bin"}


def fixture(name):
    return os.path.join(FIXTURES, name)


class HostLists(unittest.TestCase):
    def test_names_and_slots(self):
        self.assertEqual(kr.parse_host_list("a:4,b:4"), [("a", 4), ("b", 4)])
        self.assertEqual(kr.parse_host_list("a,b:2"), [("a", 1), ("b", 2)])
        self.assertEqual(kr.parse_host_list("10.0.0.1:2,n1.cluster.org:8"),
                         [("10.0.0.1", 2), ("n1.cluster.org", 8)])
        self.assertEqual(kr.parse_host_list(" a:2 , b "), [("a", 2), ("b", 1)])

    def test_a_host_named_twice_adds_its_slots(self):
        self.assertEqual(kr.parse_host_list("a:2,b:1,a:2"), [("a", 4), ("b", 1)])

    def test_unknown_formats(self):
        for text in ("a:0", "a:x", "a:4:5", "", "a,,b", "a b:2", "node[1-2]:4", "a:-1",
                     "a:", ":4", "-a:1", "a:1.5"):
            with self.subTest(text=text), self.assertRaisesRegex(kr.UsageError, "is not a host"):
                kr.parse_host_list(text)


class Hostfiles(unittest.TestCase):
    def test_comments_blank_lines_and_forms(self):
        with open(fixture("hostfile")) as f:
            hosts = kr.parse_hostfile(f.readlines(), "hostfile")
        self.assertEqual(hosts, [("nodeA", 4), ("nodeB", 2), ("10.0.0.7", 3), ("nodeC", 1)])

    def test_bad_lines_name_the_file_and_line(self):
        for line in ("a slots=x", "a slots=0", "a foo=3", "a:2 slots=3", "a slots", "a b"):
            with self.subTest(line=line), self.assertRaisesRegex(
                    kr.UsageError, r"^hostfile F line 2: .*expected 'HOST slots=N'"):
                kr.parse_hostfile(["ok slots=1\n", line + "\n"], "F")

    def test_no_host_at_all(self):
        with self.assertRaisesRegex(kr.UsageError, "names no host"):
            kr.parse_hostfile(["# only a comment\n", "\n"], "F")


class SlurmHostlist(unittest.TestCase):
    def test_ranges_lists_and_padding(self):
        self.assertEqual(kr.expand_hostlist("node[01-03,07],gpu5"),
                         ["node01", "node02", "node03", "node07", "gpu5"])
        self.assertEqual(kr.expand_hostlist("n1"), ["n1"])
        self.assertEqual(kr.expand_hostlist("a,b"), ["a", "b"])
        self.assertEqual(kr.expand_hostlist("node[8-11]"), ["node8", "node9", "node10", "node11"])
        self.assertEqual(kr.expand_hostlist("node[098-101]"),
                         ["node098", "node099", "node100", "node101"])
        self.assertEqual(kr.expand_hostlist("n[1-2]-ib,gpu[1,3]"),
                         ["n1-ib", "n2-ib", "gpu1", "gpu3"])
        self.assertEqual(kr.expand_hostlist("r[1-2]n[1-2]"), ["r1n1", "r1n2", "r2n1", "r2n2"])

    def test_malformed(self):
        for text in ("node[1-", "node[3-1]", "node[a-b]", "node]1[", "node[]", "node[1-2",
                     "node[1-200000]", "a,,b", "node[1--2]"):
            with self.subTest(text=text), self.assertRaisesRegex(kr.UsageError,
                                                                 "SLURM_JOB_NODELIST"):
                kr.expand_hostlist(text)

    def test_tasks_per_node(self):
        self.assertEqual(kr.parse_tasks_per_node("2(x3),1"), [2, 2, 2, 1])
        self.assertEqual(kr.parse_tasks_per_node("4"), [4])
        self.assertEqual(kr.parse_tasks_per_node("1(x2),3(x1)"), [1, 1, 3])
        for text in ("2(x)", "0", "x", "2(3)", "2(x0)", "", "2,,1"):
            with self.subTest(text=text), self.assertRaisesRegex(kr.UsageError, "2\\(x3\\),1"):
                kr.parse_tasks_per_node(text)


class Schedulers(unittest.TestCase):
    """Each scheduler's allocation, from the environment its job script sees."""

    def test_lsf_mcpu_hosts(self):
        env = {"LSB_MCPU_HOSTS": "h1 4 h2 4"}
        self.assertEqual(kr.scheduler_hosts(env), ("LSB_MCPU_HOSTS", [("h1", 4), ("h2", 4)]))

    def test_lsf_span_ptile_leaves_the_remainder_on_the_last_host(self):
        # bsub -n 10 -R "span[ptile=4]": 4 + 4 + 2, in both of LSF's forms.
        want = [("h1", 4), ("h2", 4), ("h3", 2)]
        self.assertEqual(kr.scheduler_hosts({"LSB_MCPU_HOSTS": "h1 4 h2 4 h3 2"})[1], want)
        env = {"LSB_DJOB_HOSTFILE": fixture("lsb_djob_hostfile"),
               "LSB_MCPU_HOSTS": "ignored 1"}  # the per-slot file wins
        self.assertEqual(kr.scheduler_hosts(env), ("LSB_DJOB_HOSTFILE", want))

    def test_lsf_malformed(self):
        for text in ("h1 4 h2", "h1 x", "h1 0", "4 h1"):
            with self.subTest(text=text), self.assertRaisesRegex(kr.UsageError,
                                                                 "LSB_MCPU_HOSTS"):
                kr.scheduler_hosts({"LSB_MCPU_HOSTS": text})
        with self.assertRaisesRegex(kr.UsageError, "^LSB_DJOB_HOSTFILE /no/such: No such file"):
            kr.scheduler_hosts({"LSB_DJOB_HOSTFILE": "/no/such"})

    def test_slurm(self):
        env = {"SLURM_JOB_NODELIST": "node[01-03,07],gpu5", "SLURM_TASKS_PER_NODE": "2(x3),1(x2)"}
        self.assertEqual(kr.scheduler_hosts(env)[1], [("node01", 2), ("node02", 2),
                                                      ("node03", 2), ("node07", 1), ("gpu5", 1)])
        # Without a task count (no --ntasks), the CPUs per node; the older variable name.
        env = {"SLURM_NODELIST": "c[1-2]", "SLURM_JOB_CPUS_PER_NODE": "8(x2)"}
        self.assertEqual(kr.scheduler_hosts(env), ("SLURM_NODELIST and SLURM_JOB_CPUS_PER_NODE",
                                                   [("c1", 8), ("c2", 8)]))

    def test_slurm_counts_must_match_the_nodes(self):
        env = {"SLURM_JOB_NODELIST": "n[1-3]", "SLURM_TASKS_PER_NODE": "2(x2)"}
        with self.assertRaisesRegex(kr.UsageError, "gives 2 counts for the 3 nodes"):
            kr.scheduler_hosts(env)
        with self.assertRaisesRegex(kr.UsageError, "neither SLURM_TASKS_PER_NODE"):
            kr.scheduler_hosts({"SLURM_JOB_NODELIST": "n1"})

    def test_pbs(self):
        env = {"PBS_NODEFILE": fixture("pbs_nodefile")}
        self.assertEqual(kr.scheduler_hosts(env),
                         ("PBS_NODEFILE", [("cn01.cluster", 3), ("cn02.cluster", 3)]))

    def test_none(self):
        self.assertIsNone(kr.scheduler_hosts({"PATH": "/bin", "LSB_MCPU_HOSTS": ""}))


class Placement(unittest.TestCase):
    def test_block_placement_takes_the_first_slots(self):
        hosts = [("a", 4), ("b", 4)]
        self.assertEqual(kr.place_ranks(hosts, 8, "-H"), hosts)
        self.assertEqual(kr.place_ranks(hosts, 6, "-H"), [("a", 4), ("b", 2)])
        self.assertEqual(kr.place_ranks(hosts, 3, "-H"), [("a", 3)])

    def test_more_ranks_than_slots(self):
        with self.assertRaisesRegex(kr.UsageError,
                                    r"^-np 9 is more than the 8 slots of a:4,b:4 \(from -H\)$"):
            kr.place_ranks([("a", 4), ("b", 4)], 9, "-H")


class Knobs(unittest.TestCase):
    def genv(self, *args):
        return kr.parse_args(list(args) + ["prog"], {}).genv

    def test_each_flag_sets_its_variable(self):
        self.assertEqual(self.genv("--fusion-threshold-mb", "32", "--cycle-time-ms=0.5",
                                   "--cache-capacity", "0", "--timeline-filename", "t.json",
                                   "--log-level", "DEBUG", "--transport", "mpi",
                                   "--hierarchical-allreduce", "--no-stall-check"),
                         {"KOLO_FUSION_THRESHOLD": "32M", "KOLO_CYCLE_TIME_MS": "0.5",
                          "KOLO_CACHE_CAPACITY": "0", "KOLO_TIMELINE": "t.json",
                          "KOLO_LOG_LEVEL": "debug", "KOLO_TRANSPORT": "mpi",
                          "KOLO_HIERARCHICAL_ALLREDUCE": "1",
                          "KOLO_STALL_CHECK_TIME_SECONDS": "0"})
        self.assertEqual(self.genv("--fusion-threshold-mb", "0.5"),
                         {"KOLO_FUSION_THRESHOLD": "524288"})

    def test_bad_values(self):
        for flag, value in (("--fusion-threshold-mb", "-1"), ("--cycle-time-ms", "nan"),
                            ("--cache-capacity", "1.5"), ("--thread-affinity", "-2"),
                            ("--log-level", "loud"), ("--flight-recorder", "16777217"),
                            ("--peer-timeout-seconds", "0.01"), ("--transport", " ")):
            with self.subTest(flag=flag), self.assertRaisesRegex(
                    kr.UsageError, f"^{flag} '{value}': expected "):
                self.genv(flag, value)

    def test_a_variable_set_twice(self):
        with self.assertRaisesRegex(kr.UsageError, "KOLO_FUSION_THRESHOLD is set twice"):
            self.genv("--fusion-threshold-mb", "1", "-x", "KOLO_FUSION_THRESHOLD=2M")

    @unittest.skipUnless(KOLO_INFO, "kolo-info not given")
    def test_every_knob_of_kolo_is_a_flag(self):
        out = subprocess.run([KOLO_INFO, "--json"], check=True, capture_output=True, text=True)
        info = json.loads(out.stdout)["knobs"]
        # Test-only switches are not knobs a user sees (docs/testing.md).
        self.assertNotIn("KOLO_TEST_NODE_SIZE", info)
        # kolorun sets the socket world's launch knobs itself (LAUNCHER_KNOBS).
        knobs = set(info) - set(kr.LAUNCHER_KNOBS)
        missing = sorted(knobs - kr.knob_variables())
        rows = "".join(f"\n    {suggested_row(name, info[name])}" for name in missing)
        self.assertEqual(missing, [], "kolo-info lists knobs kolorun has no flag for: add rows "
                         "to KNOB_FLAGS in tools/kolorun.py, e.g." + rows)
        extra = kr.knob_variables() - knobs
        if "KOLO_WORLD" not in info:  # a libkolo without the socket world (issue 29) yet
            extra -= set(kr.SOCKET_WORLD_KNOBS)
        self.assertEqual(extra, set(), "kolorun has flags for no knob")


def suggested_row(name, knob):
    """A KNOB_FLAGS row for a knob kolorun lacks, to paste and edit."""
    flag = "--" + name[len("KOLO_"):].lower().replace("_", "-")
    metavar = {"int": "N", "double": "X", "bytes": "BYTES"}.get(knob["type"], "VALUE")
    return (f'("{flag}", "{name}", "{metavar}", non_empty({knob["accepted"]!r}), '
            f'{knob["doc"]!r}),')


def run_kolorun(args, env=None):
    return subprocess.run([KOLORUN] + args, capture_output=True, text=True, timeout=60,
                          env=dict(PATH, **(env or {})))


class DryRun(unittest.TestCase):
    """The exact command, from the script as installed (its own process)."""

    GOLDEN = [
        (["-np", "8", "-H", "a:4,b:4", "true", "x", "y z"], {},
         "mpiexec.mpich -hosts a:4,b:4 -bind-to core -n 8 true x 'y z'"),
        (["-np", "2", "true"], {}, "mpiexec.mpich -bind-to core -n 2 true"),
        (["-np", "5", "--hostfile", fixture("hostfile"), "--no-bind", "true"], {},
         "mpiexec.mpich -hosts nodeA:4,nodeB:1 -n 5 true"),
        ([], {"LSB_MCPU_HOSTS": "h1 4 h2 4 h3 2"},
         "mpiexec.mpich -hosts h1:4,h2:4,h3:2 -bind-to core -n 10 true"),
        (["-np", "6"], {"LSB_DJOB_HOSTFILE": fixture("lsb_djob_hostfile")},
         "mpiexec.mpich -hosts h1:4,h2:2 -bind-to core -n 6 true"),
        ([], {"SLURM_JOB_NODELIST": "node[01-02],gpu5", "SLURM_TASKS_PER_NODE": "2(x2),1"},
         "mpiexec.mpich -hosts node01:2,node02:2,gpu5:1 -bind-to core -n 5 true"),
        ([], {"PBS_NODEFILE": fixture("pbs_nodefile")},
         "mpiexec.mpich -hosts cn01.cluster:3,cn02.cluster:3 -bind-to core -n 6 true"),
        # Explicit hosts win over the scheduler's.
        (["-H", "x:1,y:1"], {"SLURM_JOB_NODELIST": "n1", "SLURM_TASKS_PER_NODE": "4"},
         "mpiexec.mpich -hosts x:1,y:1 -bind-to core -n 2 true"),
        (["-np", "2", "--fusion-threshold-mb", "32", "--cycle-time-ms", "2",
          "--timeline-filename", "/tmp/a b.json", "-x", "FOO=1", "--env", "BAR=x y"], {},
         "mpiexec.mpich -bind-to core -genv KOLO_FUSION_THRESHOLD 32M -genv KOLO_CYCLE_TIME_MS 2 "
         "-genv KOLO_TIMELINE '/tmp/a b.json' -genv FOO 1 -genv BAR 'x y' -n 2 true"),
        (["-np", "1", "-x", "HOME"], {"HOME": "/home/u"},
         "mpiexec.mpich -bind-to core -genv HOME /home/u -n 1 true"),
        (["-np", "2", "-H", "h1,h2", "--launcher", "ssh", "--launcher-exec", "/opt/enter ns",
          "--mpi-args", "-localhost 10.9.0.1", "--bind-to", "hwthread"], {},
         "mpiexec.mpich -launcher ssh -launcher-exec '/opt/enter ns' -localhost 10.9.0.1 "
         "-hosts h1:1,h2:1 -bind-to hwthread -n 2 true"),
        # The program's own options are its own, kolorun's included.
        (["-np", "2", "--", "true", "-np", "3", "--dry-run"], {},
         "mpiexec.mpich -bind-to core -n 2 true -np 3 --dry-run"),
        (["--num-proc=2", "-n", "3", "--mpiexec", "/opt/mpich/bin/mpiexec"], {},
         "/opt/mpich/bin/mpiexec -bind-to core -n 3 true"),
    ]

    def test_golden_commands(self):
        for args, env, want in self.GOLDEN:
            with self.subTest(args=args, env=env):
                result = run_kolorun(["--dry-run"] + args + (["true"] if "true" not in args
                                                              else []), env)
                self.assertEqual((result.returncode, result.stderr), (0, ""))
                self.assertEqual(result.stdout, want + "\n")

    def test_verbose_says_where_the_hosts_came_from(self):
        result = run_kolorun(["--dry-run", "--verbose", "true"], {"LSB_MCPU_HOSTS": "h1 2"})
        self.assertEqual(result.stderr.splitlines(), [
            "kolorun: hosts from LSB_MCPU_HOSTS: h1:2",
            "kolorun: 2 ranks on h1:2: mpiexec.mpich -hosts h1:2 -bind-to core -n 2 true"])

    def test_help(self):
        result = run_kolorun(["--help"])
        self.assertEqual(result.returncode, 0)
        for flag in ["-np", "-H", "--hostfile", "--no-bind", "-x", "--dry-run",
                     "--launcher-exec"] + [row[0] for row in kr.KNOB_FLAGS]:
            self.assertRegex(result.stdout, f"\n  {flag}[ ,]")


class Errors(unittest.TestCase):
    """A mistake is one line on stderr naming it, nothing on stdout, exit 2."""

    CASES = [
        (["-np", "9", "-H", "a:4,b:4", "true"], {},
         "kolorun: -np 9 is more than the 8 slots of a:4,b:4 (from -H)"),
        (["-np", "3", "true"], {"SLURM_JOB_NODELIST": "n[1-2]", "SLURM_TASKS_PER_NODE": "1(x2)"},
         "kolorun: -np 3 is more than the 2 slots of n1:1,n2:1 (from SLURM_JOB_NODELIST and "
         "SLURM_TASKS_PER_NODE)"),
        (["-H", "a:four", "true"], {},
         "kolorun: -H: 'a:four' is not a host: expected NAME or NAME:SLOTS (SLOTS a positive "
         "integer), separated by commas"),
        (["--hostfile", fixture("hostfile_bad"), "true"], {},
         f"kolorun: hostfile {fixture('hostfile_bad')} line 2: 'nodeB slots=many': expected "
         "'HOST slots=N' (N a positive integer)"),
        (["--hostfile", fixture("hostfile_empty"), "true"], {},
         f"kolorun: hostfile {fixture('hostfile_empty')} names no host"),
        (["--hostfile", "/no/such/file", "true"], {},
         "kolorun: hostfile /no/such/file: No such file or directory"),
        (["true"], {"SLURM_JOB_NODELIST": "node[1-", "SLURM_TASKS_PER_NODE": "1"},
         "kolorun: SLURM_JOB_NODELIST='node[1-': unbalanced brackets in 'node[1-'"),
        (["-np", "2", "kolo-no-such-program"], {},
         "kolorun: program 'kolo-no-such-program' is not found on PATH"),
        (["-np", "2", fixture("hostfile")], {},
         f"kolorun: program '{fixture('hostfile')}' is not executable"),
        (["-np", "2", "./no/such"], {}, "kolorun: program './no/such' does not exist"),
        (["-np", "2"], {}, "kolorun: no program to run (usage: kolorun [options] PROGRAM "
                           "[ARGS...])"),
        (["true"], {}, "kolorun: -np is needed when no hosts are given (-H, --hostfile or a "
                       "scheduler's allocation)"),
        (["-np", "0", "true"], {}, "kolorun: -np '0': expected a number of ranks >= 1"),
        (["--np", "2", "true"], {}, "kolorun: unknown option '--np' (kolorun --help lists them)"),
        (["-np"], {}, "kolorun: -np needs a value (N)"),
        (["-H", "a", "--hostfile", "f", "true"], {}, "kolorun: give -H or --hostfile, not both"),
        (["-np", "1", "-x", "KOLO_UNSET_HERE", "true"], {},
         "kolorun: -x KOLO_UNSET_HERE: KOLO_UNSET_HERE is not set here; give -x "
         "KOLO_UNSET_HERE=VALUE"),
        (["-np", "1", "--cache-capacity", "lots", "true"], {},
         "kolorun: --cache-capacity 'lots': expected an integer >= 0"),
        (["-np", "1", "--dry-run=yes", "true"], {}, "kolorun: --dry-run takes no value"),
    ]

    def test_one_line_and_exit_2(self):
        for args, env, want in self.CASES:
            with self.subTest(args=args, env=env):
                result = run_kolorun(["--dry-run"] + args, env)
                self.assertEqual((result.returncode, result.stdout, result.stderr),
                                 (2, "", want + "\n"))

    def test_missing_mpiexec(self):
        result = run_kolorun(["-np", "1", "--mpiexec", "kolo-no-such-mpiexec", "true"])
        self.assertEqual((result.returncode, result.stderr),
                         (2, "kolorun: kolo-no-such-mpiexec is not found on PATH (MPICH's "
                             "launcher: install the mpich package, or give --mpiexec PATH)\n"))


class Exec(unittest.TestCase):
    def test_runs_mpiexec_with_the_command(self):
        with tempfile.TemporaryDirectory() as tmp:
            fake = os.path.join(tmp, "mpiexec.mpich")
            with open(fake, "w") as f:
                f.write('#!/bin/sh\nprintf "%s\\n" "$0" "$@"; exit 7\n')
            os.chmod(fake, stat.S_IRWXU)
            result = run_kolorun(["-np", "2", "-H", "a:2", "true", "a b"],
                                 {"PATH": tmp + ":/usr/bin:/bin"})
        # mpiexec's exit status is kolorun's: it replaced kolorun's process.
        self.assertEqual((result.returncode, result.stderr), (7, ""))
        self.assertEqual(result.stdout.splitlines(), [fake, "-hosts", "a:2", "-bind-to", "core",
                                                      "-n", "2", "true", "a b"])

    def test_main_hands_the_argv_to_execv(self):
        calls = []
        out, err = io.StringIO(), io.StringIO()
        code = kr.main(["-np", "2", "true"], dict(PATH), out, err,
                       lambda path, argv: calls.append((path, argv)))
        self.assertEqual((code, out.getvalue(), err.getvalue()), (0, "", ""))
        self.assertEqual(calls, [("/usr/bin/mpiexec.mpich",
                                  ["mpiexec.mpich", "-bind-to", "core", "-n", "2", "true"])])


if __name__ == "__main__":
    unittest.main()
