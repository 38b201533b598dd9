#!/usr/bin/python3
"""Self-test of kolo_flight.py on made-up dumps (CTest: kolo_flight_tool.self_test)."""

import contextlib
import io
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kolo_flight  # noqa: E402


def op(seq, name, state="done", kind="allreduce", nbytes=16, dtype="float32", t=100.0):
    return {"seq": seq, "name": name, "name_length": len(name),
            "name_hash": f"{sum(name.encode()):016x}",
            "kind": kind, "bytes": nbytes, "dtype": dtype, "state": state,
            "status": {"done": "KOLO_OK", "failed": "KOLO_ERR_STALLED"}.get(state),
            "submitted": t, "negotiated": None, "executing": None, "finished": None}


def write_dump(directory, rank, size, ops, capacity=1024, recorded=None):
    header = {"kolo_flight_recorder": 1, "rank": rank, "size": size, "reason": "stall", "pid": 1,
              "host": "h", "time": 112.5, "capacity": capacity,
              "recorded": recorded if recorded is not None else (ops[-1]["seq"] if ops else 0),
              "idle_s": 12.5}
    with open(os.path.join(directory, f"kolo-flight-rank{rank}.jsonl"), "w") as f:
        for line in [header] + ops:
            f.write(json.dumps(line) + "\n")


def run(*args):
    out = io.StringIO()
    err = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = kolo_flight.main(list(args))
    return code, out.getvalue() + err.getvalue()


def expect(cond, what, text):
    if not cond:
        print(f"FAIL: {what}\n--- output ---\n{text}")
        sys.exit(1)


def main():
    with tempfile.TemporaryDirectory() as d:
        # Agreement: exit 0.
        same = [op(i, f"step/{i}") for i in range(1, 6)]
        for r in range(3):
            write_dump(d, r, 3, same)
        code, text = run(d)
        expect(code == 0 and "no divergence" in text, "identical dumps agree", text)

        # Rank 1's #4 is another name: the first divergence names both sides.
        write_dump(d, 1, 3, same[:3] + [op(4, "grad_x", "submitted"), op(5, "step/5")])
        code, text = run(d)
        expect(code == 1, "divergence exits 1", text)
        expect("first divergence at operation #4: rank 1 submitted 'grad_x' (allreduce, 16 B "
               "float32, submitted 12.5 s before the dump); ranks 0, 2 submitted 'step/4'" in text,
               "names the odd rank first, then the others", text)
        expect("'grad_x': submitted by rank 1 as #4 submitted; never by ranks 0, 2" in text,
               "lists the name only rank 1 has", text)
        expect("'step/4': submitted by rank 0 as #4 done, 2 as #4 done; never by rank 1" in text,
               "lists the name rank 1 lacks", text)
        expect("oldest unfinished: #4 'grad_x'" in text, "per-rank summary", text)

        # A rank missing an operation the others completed (it is behind).
        write_dump(d, 1, 3, same[:3])
        code, text = run(d)
        expect("first divergence at operation #4: ranks 0, 2 submitted 'step/4'" in text and
               "rank 1 has not submitted it (its last is #3)" in text, "a rank that is behind", text)

        # Same name, other size: divergence too.
        write_dump(d, 1, 3, same[:3] + [op(4, "step/4", nbytes=8), op(5, "step/5")])
        code, text = run(d)
        expect("first divergence at operation #4: rank 1 submitted 'step/4' (allreduce, 8 B" in text,
               "a size difference", text)

        # Rings hold different windows: only numbers every dump still holds count.
        write_dump(d, 1, 3, same[2:], capacity=3)
        code, text = run(d)
        expect(code == 0 and "no divergence" in text, "a shorter ring is not a divergence", text)

        # A missing dump is named.
        os.remove(os.path.join(d, "kolo-flight-rank2.jsonl"))
        code, text = run(d)
        expect("no dump from rank 2" in text, "missing rank dump", text)

        # Bad input: exit 2 with the file named.
        bad = os.path.join(d, "kolo-flight-rank9.jsonl")
        with open(bad, "w") as f:
            f.write("not json\n")
        code, text = run(bad)
        expect(code == 2 and bad in text, "unreadable dump", text)
        code, text = run(os.path.join(d, "nope"))
        expect(code == 2, "missing file", text)
    print("kolo_flight self-test: PASS")


if __name__ == "__main__":
    main()
