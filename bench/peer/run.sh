#!/bin/sh
# Starts the peer (bench/peer/app.py) under uvicorn in its best setting: uvloop, httptools, no access log.
#   bench/peer/run.sh [--port N] [--workers N] [--models DIR] [--db FILE]
# Runs in the foreground (exec: the PID is uvicorn's); bench/run.sh starts it in the background.
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
port=8090 workers=1
while [ $# -gt 0 ]; do
  case "$1" in
    --port) port=$2; shift 2 ;;
    --workers) workers=$2; shift 2 ;;
    --models) export PEER_MODELS="$2"; shift 2 ;;
    --db) export PEER_DB="$2"; shift 2 ;;
    *) echo "bench/peer/run.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
cd "$ROOT"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
exec /usr/bin/python3 -m uvicorn bench.peer.app:app --host 127.0.0.1 --port "$port" --workers "$workers" \
  --loop uvloop --http httptools --no-access-log --log-level warning
