"""The timeline at run time (Horovod's hvd.start_timeline / hvd.stop_timeline):
every rank records its own file, tools/kolo_timeline.py merges them into one trace
with a process per rank that Python's JSON parser reads back with the straggler in
each tensor's event, and draws it as a PNG. Errors are KoloValueError (a
ValueError) naming what was wrong."""

import json
import os
import sys
import tempfile
import time

import numpy as np
import pytest
import torch

import kolo
import kolo.torch as hvd

REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(REPO, "tools"))
import kolo_timeline  # noqa: E402


def shared_dir():
    """A fresh directory that every rank knows (rank 0 makes it)."""
    name = np.zeros(256, np.uint8)
    if kolo.rank() == 0:
        path = tempfile.mkdtemp(prefix="kolo-timeline-").encode()
        name[:len(path)] = np.frombuffer(path, np.uint8)
    name = kolo.broadcast(name, 0, name="timeline.dir")
    return bytes(name).rstrip(b"\0").decode()


def test_errors_name_what_was_wrong(world):
    r, n = world
    with pytest.raises(ValueError, match="not started"):
        hvd.stop_timeline()
    with pytest.raises(kolo.KoloValueError, match="/nonexistent-dir/t-%d.json" % r):
        hvd.start_timeline("/nonexistent-dir/t-%r.json")
    with pytest.raises(ValueError, match="path is empty"):
        hvd.start_timeline("")
    d = shared_dir()
    hvd.start_timeline(os.path.join(d, "x-%r.json"))
    with pytest.raises(ValueError, match="already started"):
        hvd.start_timeline(os.path.join(d, "y-%r.json"))
    hvd.stop_timeline()
    with open(os.path.join(d, "x-%d.json" % r)) as f:
        assert isinstance(json.load(f), list)  # valid JSON once stopped
    kolo.barrier()


def step(r, n, steps, straggler):
    """Allreduces of three gradients; `straggler` submits each step 100 ms late."""
    for s in range(steps):
        kolo.barrier()
        if r == straggler:
            time.sleep(0.1)
        handles = [hvd.allreduce_async(torch.full((k,), float(r + 1)), op=hvd.Sum,
                                       name="grad/%d" % k) for k in (3, 1000, 70000)]
        for h, k in zip(handles, (3, 1000, 70000)):
            out = hvd.synchronize(h)
            assert torch.equal(out, torch.full((k,), float(n * (n + 1) // 2)))


def test_merged_trace_has_a_process_per_rank_and_names_the_straggler(world):
    r, n = world
    d = shared_dir()
    hvd.start_timeline(os.path.join(d, "rank-%r.json"), mark_cycles=True)
    step(r, n, steps=3, straggler=n - 1)  # the first step is the slow path, then cached
    hvd.stop_timeline()
    kolo.barrier()
    if r == 0:
        files = [os.path.join(d, "rank-%d.json" % i) for i in range(n)]
        merged_path = os.path.join(d, "merged.json")
        assert kolo_timeline.main(["merge"] + files + ["-o", merged_path]) == 0
        with open(merged_path) as f:
            trace = json.load(f)
        events = trace["traceEvents"]
        names = {e["pid"]: e["args"]["name"] for e in events
                 if e["ph"] == "M" and e["name"] == "process_name"}
        assert names == {i: "rank %d" % i for i in range(n)}
        for pid in range(n):
            mine = [e for e in events if e["pid"] == pid]
            neg = [e for e in mine
                   if e["name"] == "NEGOTIATE" and e["args"]["collective"] == "allreduce"]
            # Each tensor of each step, with the straggler named in its args.
            assert sorted(e["args"]["tensor"] for e in neg) == sorted(
                "allreduce.grad/%d" % k for k in (3, 1000, 70000) for _ in range(3))
            assert all(e["args"]["straggler"] == n - 1 for e in neg), neg
            if pid != n - 1:  # the others waited for it
                assert all(e["dur"] >= 5000 and e["args"]["straggler_lag_us"] >= 5000
                           for e in neg), neg
            buckets = [e for e in mine
                       if e.get("cat") == "bucket" and e["args"]["collective"] == "allreduce"]
            assert buckets and sum(e["args"]["bytes"] for e in buckets) == 3 * 4 * 71003
            for b in buckets:
                assert b["args"]["transport"] in ("shm", "shm+and", "ring", "mpi", "hierarchical")
                assert b["args"]["gbps"] >= 0 and b["dur"] >= 0
            assert any(e["name"] == "CYCLE" and e["ph"] == "i" for e in mine)
        png = os.path.join(d, "merged.png")
        assert kolo_timeline.main(["plot", merged_path, "-o", png]) == 0
        with open(png, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    kolo.barrier()


def test_a_plain_path_is_rank_zeros_alone(world):
    r, n = world
    d = shared_dir()
    path = os.path.join(d, "single.json")
    hvd.start_timeline(path)  # as a Horovod program does, on every rank
    step(r, n, steps=1, straggler=-1)
    hvd.stop_timeline()
    kolo.barrier()
    assert os.listdir(d) == ["single.json"]
    with open(path) as f:
        events = json.load(f)
    assert {e["pid"] for e in events} == {0}
    kolo.barrier()
