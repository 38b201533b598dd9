#!/usr/bin/env bash
# usage: install_test.sh BUILD_DIR CONSUMER_SOURCE_DIR MPIEXEC CMAKE CC
#
# 1. cmake --install BUILD_DIR into a fresh temporary prefix;
# 2. checks the installed files, and that the installed kolo-info runs;
# 3. configures and builds the consumer with find_package(kolo) (CMAKE_PREFIX_PATH);
# 4. compiles the C consumer once more with `pkg-config --cflags --libs kolo`;
# 5. runs every consumer under MPIEXEC -n 2: each checks exact results itself;
# 6. runs the C consumer again through the installed kolorun.
set -euo pipefail
build=$1 consumer=$2 mpiexec=$3 cmake=$4 cc=$5

work=$(mktemp -d "${TMPDIR:-/tmp}/kolo-install-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
step() { echo "== $*"; }
fail() { echo "install test: FAIL: $*" >&2; exit 1; }

step "install into $prefix"
"$cmake" --install "$build" --prefix "$prefix" >"$work/install.log" || {
  cat "$work/install.log"; fail "cmake --install"; }

for f in include/kolo/kolo.h include/kolo/kolo.hpp include/kolo/kolo_groups.hpp include/kolo/kolo_sets.hpp bin/kolo-info bin/kolorun; do
  [[ -f $prefix/$f ]] || fail "$f is not installed"
done
libdir=$(dirname "$(find "$prefix" -name 'libkolo.so' -print -quit)")
[[ -n $libdir && $libdir != . ]] || fail "libkolo.so is not installed"
[[ -f $libdir/cmake/kolo/koloConfig.cmake && -f $libdir/cmake/kolo/koloConfigVersion.cmake ]] ||
  fail "the CMake package is not installed under $libdir/cmake/kolo"
[[ -f $libdir/pkgconfig/kolo.pc ]] || fail "kolo.pc is not installed under $libdir/pkgconfig"

step "installed kolo-info runs (RPATH finds libkolo)"
"$prefix/bin/kolo-info" --json | grep -q '"knobs"' || fail "installed kolo-info --json"

step "find_package(kolo) consumer"
"$cmake" -S "$consumer" -B "$work/consumer-build" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_C_COMPILER="$cc" >"$work/configure.log" 2>&1 || {
  cat "$work/configure.log"; fail "configuring the consumer"; }
"$cmake" --build "$work/consumer-build" >"$work/build.log" 2>&1 || {
  cat "$work/build.log"; fail "building the consumer"; }

step "pkg-config consumer"
export PKG_CONFIG_PATH=$libdir/pkgconfig
pc_libdir=$(pkg-config --variable=libdir kolo)
[[ $(cd "$pc_libdir" && pwd -P) == $(cd "$libdir" && pwd -P) ]] ||
  fail "kolo.pc's libdir $pc_libdir is not $libdir"
# shellcheck disable=SC2046  # pkg-config's output is meant to be split
"$cc" -std=c99 -Wall -Wextra -Werror "$consumer/consumer.c" -o "$work/consumer-pc" \
  $(pkg-config --cflags --libs kolo) -Wl,-rpath,"$pc_libdir" || fail "pkg-config build"

for exe in "$work/consumer-build/kolo_consumer_c" "$work/consumer-build/kolo_consumer_cpp" \
           "$work/consumer-pc"; do
  step "mpiexec -n 2 $(basename "$exe")"
  "$mpiexec" -n 2 "$exe" || fail "$(basename "$exe") under mpiexec -n 2"
done

step "installed kolorun -np 2 kolo_consumer_c"
[[ -x $prefix/bin/kolorun ]] || fail "bin/kolorun is not executable"
"$prefix/bin/kolorun" --mpiexec "$mpiexec" -np 2 "$work/consumer-build/kolo_consumer_c" ||
  fail "kolo_consumer_c through the installed kolorun"
echo "install test: PASS"
