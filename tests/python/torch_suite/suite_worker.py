"""One MPI rank of distributed_suite.py's mpi launcher: runs the named tests of
the suite one after another, as the suite's own spawned processes would
(MultiProcessTestCase._run), and rank 0 records each outcome as a JSON line.

    suite_worker.py BACKEND TESTS_FILE RESULTS_FILE TEST_TIMEOUT_SECONDS

kolo (started here on the MPI world) also carries the harness's own agreement:
the shared temporary folder and each test's outcome on every rank. A test that
runs past the timeout dumps every thread's stack and ends this rank (and so the
job); distributed_suite.py records it and goes on after it.
"""

import faulthandler
import json
import os
import sys
import tempfile
import traceback
import unittest
from datetime import timedelta

import numpy as np

import suite_case
import kolo
import torch.distributed as dist
from torch.nn.parallel._replicated_tensor_ddp_utils import _set_ddp_with_replicated_tensor
from torch.testing._internal.common_distributed import TEST_SKIPS
from torch.testing._internal.distributed import distributed_test as dt

OUTCOMES = ["passed", "skipped by the suite", "failed"]
SKIP_CODES = {s.exit_code: s.message for s in TEST_SKIPS.values()}


def shared_temp_dir(rank):
    """A folder every rank uses (rank 0 makes it), set as TEMP_DIR as the suite's
    setUp does."""
    path = np.zeros(512, np.uint8)
    if rank == 0:
        made = tempfile.mkdtemp(prefix="kolo-suite-").encode()
        path[:len(made)] = np.frombuffer(made, np.uint8)
        for sub in ("barrier", "test_dir", "init_dir"):
            os.mkdir(os.path.join(made.decode(), sub))
    path = bytes(kolo.broadcast(path, 0, name="suite.tmp")).rstrip(b"\0").decode()
    os.environ["TEMP_DIR"] = path
    return path


def run_one(name, index, rank, size, backend, tmp, timeout):
    """(outcome, detail) of one test on this rank."""
    case = suite_case.Suite(name)
    method = getattr(case, name)
    if getattr(method, "__unittest_skip__", False):
        return "skipped by the suite", getattr(method, "__unittest_skip_why__", "")
    case.rank = rank
    case.file_name = os.path.join(tmp, "init_dir", "init.%d" % index)
    os.environ["INIT_METHOD"] = "file://" + case.file_name
    if rank == 0:
        dt.Barrier.init()
    dt.Barrier.barrier_id = 0
    kolo.barrier()
    try:
        dist.init_process_group(init_method=case.init_method, backend=backend, world_size=size,
                                rank=rank, timeout=timedelta(seconds=timeout))
        case._barrier()
        method()
        case._barrier()
        return "passed", ""
    except unittest.SkipTest as e:
        return "skipped by the suite", str(e)
    except SystemExit as e:
        if e.code in SKIP_CODES:
            return "skipped by the suite", SKIP_CODES[e.code]
        return "failed", "exit %s" % e.code
    except Exception:  # noqa: BLE001 - the suite's failures, recorded
        return "failed", traceback.format_exc()[-3000:]
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def agree(outcome, detail, index, rank):
    """The outcome on every rank: failed if any failed (with a failing rank's
    detail), else skipped if any skipped, else passed."""
    codes = kolo.allgather(np.array([OUTCOMES.index(outcome)], np.int64),
                           name="suite.%d.outcome" % index)
    text = np.frombuffer(("rank %d: %s" % (rank, detail)).encode()[:4000], np.uint8)
    details = kolo.allgather(text.copy(), name="suite.%d.detail" % index)
    worst = int(codes.max())
    sizes = kolo.allgather(np.array([len(text)], np.int64), name="suite.%d.sizes" % index)
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    first = int(np.argmax(codes == worst))
    return OUTCOMES[worst], bytes(details[offsets[first]:offsets[first + 1]]).decode(
        errors="replace")


def main():
    backend, tests_file, results_file, timeout = sys.argv[1:5]
    timeout = int(timeout)
    tests = open(tests_file).read().split()
    kolo.init()
    rank, size = kolo.rank(), kolo.size()
    tmp = shared_temp_dir(rank)
    _set_ddp_with_replicated_tensor(True)
    for index, name in enumerate(tests):
        if rank == 0:
            with open(results_file, "a") as f:
                f.write(json.dumps({"test": name, "outcome": "started"}) + "\n")
        faulthandler.dump_traceback_later(timeout, exit=True)
        outcome, detail = run_one(name, index, rank, size, backend, tmp, timeout)
        faulthandler.cancel_dump_traceback_later()
        outcome, detail = agree(outcome, detail, index, rank)
        if rank == 0:
            with open(results_file, "a") as f:
                f.write(json.dumps({"test": name, "outcome": outcome, "detail": detail}) + "\n")
    kolo.barrier()


if __name__ == "__main__":
    main()
