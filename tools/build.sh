#!/usr/bin/env bash
# Installs missing dependencies, configures build/ (Release, Ninja) once, and builds
# everything. Executables land in build/bin, libraries in build/lib.
# Extra arguments go to `cmake --build` (e.g. `tools/build.sh --target kolo`).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

tools/setup-deps.sh
if [[ ! -f build/build.ninja ]]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
fi
cmake --build build "$@"
