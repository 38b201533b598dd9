"""The suite's test class for backend $BACKEND (kolo or gloo), as torch's own
test_distributed_spawn.py builds it, with backend "kolo" registered (importing
kolo.torch.distributed) and declared a plugin backend that runs DDP. Imported by
distributed_suite.py, by suite_worker.py in each MPI rank, and by the processes
the suite spawns."""

import os
import sys
import unittest

os.environ.setdefault("BACKEND", "kolo")
os.environ.setdefault("WORLD_SIZE", "2")

import kolo.torch.distributed  # noqa: E402,F401 (registers backend "kolo")
from torch.testing._internal.common_distributed import DistTestCases  # noqa: E402

# Before distributed_test is imported: its decorators read these sets. "gpu" is
# the suite's name for what gloo and nccl share (the object collectives, a group
# of another backend, DDP profiling), on the CPU too.
for _feature in ("plugin", "ddp", "gpu"):
    DistTestCases.backend_feature[_feature].add("kolo")

from torch.testing._internal.distributed.distributed_test import (  # noqa: E402
    DistributedTest, TestDistBackend)


class Suite(TestDistBackend, DistributedTest._DistTestBase):
    """Spawns its processes in setUp under the spawn launcher only (suite_worker.py
    runs a test's body in the MPI ranks instead)."""

    def setUp(self):
        super().setUp()
        if os.environ.get("KOLO_SUITE_SPAWN"):
            self._spawn_processes()


def run_spawned(tests):
    """{test: (outcome, detail)}, running each test the upstream way."""
    out = {}
    for name in tests:
        result = unittest.TestResult()
        Suite(name).run(result)
        if result.errors or result.failures:
            out[name] = ("failed", (result.errors + result.failures)[0][1][-3000:])
        elif result.skipped:
            out[name] = ("skipped by the suite", result.skipped[0][1])
        else:
            out[name] = ("passed", "")
        print("%s: %s" % (name, out[name][0]), file=sys.stderr, flush=True)
    return out
