#!/bin/sh
# Configures (or reconfigures) a meson build directory and compiles it.
#   deploy/build.sh DIR [MESON-OPTION...]     e.g. deploy/build.sh build --buildtype=release
set -eu
dir=${1:?usage: deploy/build.sh DIR [MESON-OPTION...]}
shift
cd "$(dirname "$0")/.."
if [ -f "$dir/meson-private/coredata.dat" ]; then
  meson setup --reconfigure "$dir" "$@" >/dev/null
else
  meson setup "$dir" "$@" >/dev/null
fi
meson compile -C "$dir" >/dev/null
echo "build.sh: built $dir"
