#!/usr/bin/env bash
# gpu_kit.sh BUILD_DIR KIT_DIR — packs kolo's device tests and tools, built here, into
# a folder that runs on a machine with GPUs but without MPICH, GoogleTest or a
# compiler (e.g. a lent GPU machine: Ubuntu 24.04, CUDA 13 runtime, NCCL, Open MPI).
#
# KIT_DIR gets:
#   bin/  the device tests (tests/gpu: gpu_*_test; tests/unit/nccl: *_test, when
#         built), kolo-allreduce-perf, kolo-info, MPICH's launcher (mpiexec.hydra
#         and hydra_pmi_proxy, which hydra runs from its own folder) and an
#         `mpiexec` script that calls it with the fork launcher;
#   lib/  libkolo and every shared library these need that the target provides
#         neither as part of the system (glibc, libstdc++, libgcc) nor of CUDA/NCCL;
#         libraries over 8 MiB are gzipped when the kit would pass
#         KOLO_KIT_BUDGET_MIB (default 24), and run.sh unpacks them outside the kit;
#   tests.txt  how run.sh runs each test ("mpi NAME" or "plain NAME");
#   MANIFEST   the commit, the build folder and every file with its size;
#   run.sh     see its own header.
#
# Only the ELF files' own dependencies are followed (ldd), plus one plugin loaded at
# run time: UCX's cross-memory-attach transport (lib/ucx/libuct_cma.so.0, where UCX
# looks beside libucs). Without it MPICH 4.0.2's MPI_Finalize could spin in
# ucp_worker_progress while its peer had moved on: on the lent H100 machine 7 of
# 26 two-rank runs hung there, none of 194 with the module. Other plugins (UCX's
# InfiniBand modules, hwloc's) are not carried. The binaries' RUNPATH still names
# the build folder; on the target LD_LIBRARY_PATH (set by run.sh) comes first.
set -euo pipefail

if [[ $# -ne 2 ]]; then
  echo "usage: $0 BUILD_DIR KIT_DIR" >&2
  exit 2
fi
build=$(cd "$1" && pwd)
mkdir -p "$2"
kit=$(cd "$2" && pwd)
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
budget_mib=${KOLO_KIT_BUDGET_MIB:-24}

if [[ $kit == / || $kit == "$src" || $kit == "$build" ]]; then
  echo "gpu_kit: KIT_DIR must be a folder of its own, not $kit" >&2
  exit 2
fi
rm -rf "${kit:?}/bin" "${kit:?}/lib" "$kit/tests.txt" "$kit/MANIFEST" "$kit/run.sh"
mkdir -p "$kit/bin" "$kit/lib"

# --- the programs -------------------------------------------------------------
programs=()
: >"$kit/tests.txt"
for exe in "$build"/bin/gpu_*_test; do
  [[ -x $exe ]] || continue
  programs+=("$exe")
  echo "mpi $(basename "$exe")" >>"$kit/tests.txt"
done
if [[ ${#programs[@]} -eq 0 ]]; then
  echo "gpu_kit: no gpu_*_test in $build/bin; build them first:" >&2
  echo "  cmake --build $build --target kolo_gpu_tests kolo kolo-allreduce-perf kolo-info" >&2
  exit 1
fi
for test_src in "$src"/tests/unit/nccl/*_test.cc; do
  [[ -e $test_src ]] || continue
  exe="$build/bin/$(basename "$test_src" .cc)"
  if [[ -x $exe ]]; then
    programs+=("$exe")
    echo "plain $(basename "$exe")" >>"$kit/tests.txt"
  else
    echo "gpu_kit: note: $(basename "$exe") is not built; not in the kit" >&2
  fi
done
for tool in kolo-allreduce-perf kolo-info; do
  if [[ -x $build/bin/$tool ]]; then
    programs+=("$build/bin/$tool")
  else
    echo "gpu_kit: note: $tool is not built; not in the kit" >&2
  fi
done
hydra=$(readlink -f "$(command -v mpiexec.mpich || command -v mpiexec.hydra)")
proxy=$(dirname "$hydra")/hydra_pmi_proxy
[[ -x $hydra && -x $proxy ]] || { echo "gpu_kit: MPICH's hydra not found" >&2; exit 1; }
programs+=("$hydra" "$proxy")

for p in "${programs[@]}"; do
  cp -L "$p" "$kit/bin/"
done
chmod 755 "$kit"/bin/*

# --- the libraries ------------------------------------------------------------
# Provided by the target: glibc's libraries, the C++ runtime, the GPU stack.
system_libs='^(linux-vdso|linux-gate|ld-linux|libc|libm|libdl|libpthread|librt|libresolv|libutil|libanl|libmvec|libstdc\+\+|libgcc_s|libatomic|libcuda|libcudart|libnccl|libnvidia-[a-z]*)\.so'
missing=0
for p in "${programs[@]}"; do
  # "name => path (address)" lines; "name => not found" is an error here.
  while read -r name arrow path _; do
    [[ $arrow == "=>" ]] || continue
    [[ $name =~ $system_libs ]] && continue
    if [[ $path == "not" ]]; then
      echo "gpu_kit: $(basename "$p") needs $name, which is not found here" >&2
      missing=1
      continue
    fi
    [[ -e $kit/lib/$name ]] || cp -L "$path" "$kit/lib/$name"
    if [[ $name == libucs.so.0 ]]; then ucs_dir=$(dirname "$(readlink -f "$path")"); fi
  done < <(ldd "$p")
done
[[ $missing -eq 0 ]] || exit 1
# UCX's shared-memory transport module (see the header).
if [[ -n ${ucs_dir:-} && -e $ucs_dir/ucx/libuct_cma.so.0 ]]; then
  mkdir -p "$kit/lib/ucx"
  cp -L "$ucs_dir/ucx/libuct_cma.so.0" "$kit/lib/ucx/"
fi

# --- the launcher wrapper ---------------------------------------------------------
cat >"$kit/bin/mpiexec" <<'EOF'
#!/usr/bin/env bash
# MPICH's hydra from this kit, launching on this machine only (no ssh).
exec "$(dirname "${BASH_SOURCE[0]}")/mpiexec.hydra" -launcher fork "$@"
EOF
chmod 755 "$kit/bin/mpiexec"

# --- size -----------------------------------------------------------------------
total=$(du -sb "$kit" | cut -f1)
if (( total > budget_mib * 1024 * 1024 )); then
  while IFS= read -r big; do
    gzip -9 -n "$big"  # leaves big.gz; run.sh restores big
  done < <(find "$kit/lib" -type f -size +8M)
fi

# --- what is in it --------------------------------------------------------------
{
  echo "kolo device kit"
  echo "commit: $(git -C "$src" rev-parse HEAD 2>/dev/null || echo unknown)$(git -C "$src" diff --quiet HEAD 2>/dev/null || echo ' (working tree differs)')"
  echo "build: $build"
  echo "made: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -n)"
  (cd "$kit" && find bin lib -type f -printf '%s\t%p\n' | sort -k2)
} >"$kit/MANIFEST"

cp "$src/tools/gpu_kit_run.sh" "$kit/run.sh"
chmod 755 "$kit/run.sh"

size_mib=$(du -sb "$kit" | awk '{printf "%.1f", $1 / 1048576}')
echo "gpu_kit: $kit: $(wc -l <"$kit/tests.txt") test programs, $(find "$kit/lib" -type f | wc -l) libraries, ${size_mib} MiB"
