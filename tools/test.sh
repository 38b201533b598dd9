#!/usr/bin/env bash
# Quick start, part 2: set up, build, and run the whole test suite. The exit code is
# ctest's. Extra arguments go to ctest (e.g. `tools/test.sh -L unit`).
# Multi-rank tests declare PROCESSORS 2, so -j2 never runs two of them at once.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

tools/build.sh
exec ctest --test-dir build --output-on-failure -j2 "$@"
