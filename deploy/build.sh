#!/bin/sh
# Configures (or reconfigures) a meson build directory and compiles it.
#   deploy/build.sh DIR [MESON-OPTION...]     e.g. deploy/build.sh build --buildtype=release
# One line per phase; meson's report stays quiet (its warnings are shown, and all of it when setup
# fails), ninja's progress lines too, and compiler warnings and errors are printed as they come.
set -eu
dir=${1:?usage: deploy/build.sh DIR [MESON-OPTION...]}
shift
cd "$(dirname "$0")/.."
setup_log=$(mktemp)
trap 'rm -f "$setup_log"' EXIT
if [ -f "$dir/meson-private/coredata.dat" ]; then
  echo "build: meson setup --reconfigure $dir${*:+ $*}"
  set -- --reconfigure "$dir" "$@"
else
  echo "build: meson setup $dir${*:+ $*}"
  set -- "$dir" "$@"
fi
if ! meson setup "$@" >"$setup_log" 2>&1; then
  cat "$setup_log" >&2
  echo "build: meson setup failed (full log: $dir/meson-logs/meson-log.txt)" >&2
  exit 1
fi
grep -E '^(WARNING|DEPRECATION):' "$setup_log" || true
# the number of steps ahead, from ninja's dry run ("[k/N] ..." lines), so the wait has a size
steps=$(ninja -C "$dir" -n | sed -n 's|^\[[0-9]*/\([0-9]*\)\].*|\1|p' | tail -n 1)
if [ -n "$steps" ]; then
  echo "build: compiling $dir: $steps steps (ninja; compiler warnings, if any, follow)"
  ninja -C "$dir" --quiet
else
  echo "build: $dir is up to date"
fi
echo "build: built $dir (the daemon: $dir/server/pgcld)"
