#!/usr/bin/env python3
"""Test for kolo-info: `--json` must be one valid JSON object (checked with Python's
own parser, independent of tools/json.cc) carrying what kolo-info promises, with
knob values that follow the environment and whether ranks must set each alike;
the text form must list every knob with that column.

usage: check_kolo_info.py PATH/TO/kolo-info
"""
import json
import os
import subprocess
import sys


def run(exe, *args, env=None):
    return subprocess.run([exe, *args], check=True, capture_output=True, text=True,
                          env=env, timeout=60).stdout


def main():
    exe = sys.argv[1]
    env = dict(os.environ, KOLO_CACHE_CAPACITY="77", KOLO_TIMELINE='/tmp/a "quoted" path')
    env.pop("KOLO_FUSION_THRESHOLD", None)
    info = json.loads(run(exe, "--json", env=env))
    for key in ("version", "build", "transports", "knobs", "topology"):
        assert key in info, f"--json lacks {key!r}"
    assert info["version"].count(".") == 2, info["version"]
    for name, transport in info["transports"].items():
        assert isinstance(transport["built"], bool) and isinstance(transport["reason"], str), name
    assert info["transports"]["mpi"]["built"] is True
    knobs = info["knobs"]
    assert knobs["KOLO_FUSION_THRESHOLD"]["default"] == "64M"
    assert knobs["KOLO_FUSION_THRESHOLD"]["value"] == "64M"
    assert knobs["KOLO_CACHE_CAPACITY"]["value"] == "77"
    assert knobs["KOLO_TIMELINE"]["value"] == '/tmp/a "quoted" path'
    # Whether ranks may differ (kolo_init compares the knobs that must agree).
    for name, knob in knobs.items():
        assert knob["agreement"] in ("must agree", "may differ"), (name, knob)
    assert knobs["KOLO_FUSION_THRESHOLD"]["agreement"] == "must agree"
    assert knobs["KOLO_TRANSPORT"]["agreement"] == "must agree"
    assert knobs["KOLO_LOG_LEVEL"]["agreement"] == "may differ"
    topology = info["topology"]
    assert "error" not in topology, topology
    assert topology["pus"] >= topology["cores"] >= 1 and topology["numa_nodes"] >= 1, topology

    text = run(exe, env=env)
    for name, knob in knobs.items():
        line = next((l for l in text.splitlines() if l.split()[:1] == [name]), None)
        assert line is not None, f"text output lacks {name}"
        assert knob["agreement"] in line, f"{name}'s line lacks {knob['agreement']!r}: {line}"
    assert "Topology" in text and "Transports" in text
    print(f"kolo-info: {len(knobs)} knobs, {len(info['transports'])} transports, "
          f"{topology['cores']} cores: OK")


if __name__ == "__main__":
    main()
