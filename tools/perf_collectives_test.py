#!/usr/bin/python3
"""tools/perf_collectives.py end to end: a tiny sweep of every collective at 2 ranks,
the report's table has a row per collective and size, and a wrong element anywhere
makes the report fail instead of printing a speedup; each sweep's placement is
recorded, `--start` adds runs, `report --placement` keeps only that placement's, and
`--memory kolo` and `--in-place` reach the benchmark.

Usage: perf_collectives_test.py BUILD_DIR
"""
import os
import subprocess
import sys
import tempfile

TOOL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "perf_collectives.py")
COLLECTIVES = ["allreduce", "allgather", "broadcast", "alltoall", "reducescatter"]


def tool(*args):
    return subprocess.run([sys.executable, "-B", TOOL, *args], capture_output=True, text=True)


def main():
    build = sys.argv[1]
    with tempfile.TemporaryDirectory() as out:
        done = tool("run", out, "--runs", "2", "--build", build, "--max", "4K")
        assert done.returncode == 0, done.stdout + done.stderr
        done = tool("report", out)
        assert done.returncode == 0, done.stdout + done.stderr
        for c in COLLECTIVES:
            assert f"### {c} (2 runs)" in done.stdout, done.stdout
        rows = [l for l in done.stdout.splitlines() if l.startswith("| 4K |")]
        assert len(rows) == len(COLLECTIVES) - 1, done.stdout  # allreduce steps 8, 32, ..., 2K
        # Each sweep's round trip was recorded (memory_ceiling_bench is built beside).
        for c in COLLECTIVES:
            for r in (1, 2):
                with open(os.path.join(out, f"{c}.{r}.placement")) as f:
                    assert float(f.read()) > 0, (c, r)
        # --memory and --in-place reach the tool (in place: allreduce only).
        done = tool("run", out, "--runs", "1", "--start", "4", "--build", build, "--max", "4K",
                    "--collectives", "allreduce", "alltoall", "--memory", "kolo", "--in-place")
        assert done.returncode == 0, done.stdout + done.stderr
        head = open(os.path.join(out, "allreduce.4.txt")).read()
        assert "(in place); buffers from kolo_alloc" in head, head
        head = open(os.path.join(out, "alltoall.4.txt")).read()
        assert "in place" not in head and "buffers from kolo_alloc" in head, head
        for c in ("allreduce", "alltoall"):
            os.remove(os.path.join(out, f"{c}.4.csv"))
        # A third run adds to the folder; then run 1 is near, 2 and 3 far.
        done = tool("run", out, "--runs", "1", "--start", "3", "--build", build, "--max", "4K",
                    "--collectives", "allgather")
        assert done.returncode == 0, done.stdout + done.stderr
        for r, ns in ((1, "60"), (2, "400"), (3, "420")):
            for c in COLLECTIVES:
                path = os.path.join(out, f"{c}.{r}.placement")
                if os.path.exists(path):
                    open(path, "w").write(ns + "\n")
        near = tool("report", out, "--placement", "near")
        far = tool("report", out, "--placement", "far")
        assert near.returncode == 0 and far.returncode == 0, near.stderr + far.stderr
        assert "### allgather (1 runs)" in near.stdout, near.stdout
        assert "### allgather (2 runs)" in far.stdout, far.stdout
        assert "### broadcast (1 runs)" in far.stdout, far.stdout
        # A wrong element in one run's row: the report refuses.
        path = os.path.join(out, "broadcast.2.csv")
        lines = open(path).read().splitlines()
        header = lines[0].split(",")
        cells = lines[1].split(",")
        cells[header.index("wrong")] = "3"
        lines[1] = ",".join(cells)
        open(path, "w").write("\n".join(lines) + "\n")
        done = tool("report", out)
        assert done.returncode != 0 and "wrong elements" in done.stderr, done.stdout + done.stderr
    print("perf_collectives_test: ok")


if __name__ == "__main__":
    main()
