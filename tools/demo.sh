#!/usr/bin/env bash
# Quick start, part 1: set up, build, and train the demo model on two ranks.
# Extra arguments go to the demo (e.g. `tools/demo.sh --epochs 30 --check-single`).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

tools/build.sh
exec mpiexec.mpich -n 2 build/bin/kolo-train-demo "$@"
