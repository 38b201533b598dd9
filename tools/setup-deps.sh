#!/usr/bin/env bash
# Installs the Debian 12 packages kolo needs to build, test and plot. Idempotent:
# checks with dpkg-query first and stays quiet when everything is present; runs
# `apt-get update` only when something is missing. Never installs Open MPI
# (nor python3-mpi4py, which would pull it in): kolo builds against MPICH.
set -euo pipefail

packages=(
  cmake ninja-build g++ pkg-config
  mpich libmpich-dev
  libhwloc-dev libgtest-dev libbenchmark-dev
  python3-numpy python3-matplotlib python3-torch python3-pytest
  libtorch-dev  # torch's C++ headers: libkolo_torch_memory (kolo.torch.use_kolo_memory)
  iproute2  # ip, tc and ss, for the pretend cluster (tools/pretend_cluster.sh); its
            # unshare, mount and hostname are in Debian's essential set. netem (delay,
            # loss) is the kernel's sch_netem, in Debian's kernel; without it the
            # cluster shapes rate only and says so
  gdb  # the failure matrix's watchdog prints a hung rank's stacks (run_matrix.py --stacks)
)
# `setup-deps.sh --fuzz`: also clang and its runtime libraries (libFuzzer), for
# tools/fuzz.sh. CI does not need them: it replays the corpus with g++.
if [[ "${1:-}" == "--fuzz" ]]; then
  packages+=(clang libclang-rt-14-dev)
fi

missing=()
for pkg in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
  if [[ "$status" != "install ok installed" ]]; then
    missing+=("$pkg")
  fi
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

if [[ $(id -u) -eq 0 ]]; then
  as_root=()
elif command -v sudo >/dev/null 2>&1; then
  as_root=(sudo)
else
  echo "setup-deps: missing packages: ${missing[*]}" >&2
  echo "setup-deps: not root and no sudo; install them, then run this again" >&2
  exit 1
fi

echo "setup-deps: installing ${missing[*]}"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! { "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
       "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive \
         apt-get install -y -qq --no-install-recommends "${missing[@]}"; } >"$log" 2>&1; then
  cat "$log" >&2
  echo "setup-deps: apt-get failed" >&2
  exit 1
fi
