"""The suite's test class for backend $BACKEND (kolo or gloo), as torch's own
test_distributed_spawn.py builds it, with backend "kolo" registered (importing
kolo.torch.distributed) and declared a plugin backend that runs DDP. Imported by
distributed_suite.py, by suite_worker.py in each MPI rank, and by the processes
the suite spawns."""

import dataclasses
import os
import sys
import unittest


def _hashable_tensor_properties():
    """Debian's torch 1.13 on Python 3.11: torch.distributed._shard's
    ShardedTensorMetadata has a TensorProperties() instance as a dataclass default,
    which Python 3.11 refuses (an unhashable default counts as mutable), so every
    test that imports it (DDP's) fails on every backend. torch 2.x uses a
    default_factory; here TensorProperties keeps object's hash, which is all the
    check asks. The suite's processes only."""
    original = dataclasses.dataclass

    def dataclass(cls=None, **kwargs):
        def wrap(c):
            out = original(**kwargs)(c)
            if out.__name__ == "TensorProperties" and out.__hash__ is None:
                out.__hash__ = object.__hash__
            return out
        return wrap if cls is None else wrap(cls)
    dataclasses.dataclass = dataclass


_hashable_tensor_properties()

os.environ.setdefault("BACKEND", "kolo")
os.environ.setdefault("WORLD_SIZE", "2")

import kolo.torch.distributed  # noqa: E402,F401 (registers backend "kolo")
import torch  # noqa: E402
from torch.testing._internal.common_distributed import DistTestCases  # noqa: E402

# Before distributed_test is imported: its decorators read these sets. "gpu" is
# the suite's name for what gloo and nccl share (the object collectives, a group
# of another backend, DDP profiling), on the CPU too.
for _feature in ("plugin", "ddp", "gpu"):
    DistTestCases.backend_feature[_feature].add("kolo")

from torch.testing._internal.distributed.distributed_test import (  # noqa: E402
    DistributedTest, TestDistBackend)


class Suite(TestDistBackend, DistributedTest._DistTestBase):
    """Starts its processes in setUp under the spawn and fork launchers only
    (suite_worker.py runs a test's body in the MPI ranks instead)."""

    def setUp(self):
        super().setUp()
        how = os.environ.get("KOLO_SUITE_SPAWN")
        if how == "fork":  # torch's processes, forked: no import of torch per rank
            self._start_processes(torch.multiprocessing.get_context("fork").Process)
        elif how:
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
        if os.environ.get("KOLO_SUITE_LOG"):  # progress of a long run, as it goes
            with open(os.environ["KOLO_SUITE_LOG"], "a") as log:
                log.write("%s %s: %s\n" % (os.environ["BACKEND"], name, out[name][0]))
    return out
