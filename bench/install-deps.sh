#!/bin/sh
# Installs what bench/run.sh needs from Debian's packages (bookworm or later), as root.
#   bench/install-deps.sh
# First what building and running pgcld needs (deploy/install-deps.sh), then the bench's own:
#   python3-fastapi python3-uvicorn    the peer (bench/peer/): FastAPI on uvicorn
#   python3-uvloop python3-httptools   uvicorn's fast event loop and HTTP parser (the peer's best setting)
#   python3-torch python3-numpy        the peer's model (train/load.py) and base64 decoding
#   linux-perf                         the profile notes (perf stat / perf record on pgcld)
# The load generator and the forward micro-benchmark are C (bench/throughput/), built with the
# compiler deploy/install-deps.sh installs. Nothing here is needed by the daemon itself.
set -eu
cd "$(dirname "$0")/.."
if [ "$(id -u)" -eq 0 ]; then
  deploy/install-deps.sh
fi
packages="python3-fastapi python3-uvicorn python3-uvloop python3-httptools python3-torch python3-numpy linux-perf"
export DEBIAN_FRONTEND=noninteractive
missing=""
for p in $packages; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$(echo $missing)" ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "bench/install-deps.sh: missing$missing; run as root (apt-get needs it)" >&2
    exit 1
  fi
  apt-get update -qq
  # shellcheck disable=SC2086
  apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi
echo "bench/install-deps.sh: dependencies present"
