#!/usr/bin/python3
"""tools/perf_collectives.py end to end: a tiny sweep of every collective at 2 ranks,
the report's table has a row per collective and size, and a wrong element anywhere
makes the report fail instead of printing a speedup.

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
