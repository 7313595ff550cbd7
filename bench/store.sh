#!/bin/sh
# The store as a dimension (issue 17): pgcld on SQLite against one and two pgcld replicas on one
# PostgreSQL database, same machine, same run. One command, as root (it makes a throw-away
# PostgreSQL cluster with pg_createcluster, dropped at the end):
#   bench/store.sh            the run (~2-3 min on 2 idle cores): bench/results/store.json and the section
#                             "## Issue 17: the store as a dimension" of bench/RESULTS.md
#   bench/store.sh --quick    smoke check (< 1 min): bench/results/quick/store.json, Markdown to stdout only
#   bench/store.sh --no-build measure the build-bench/ already there
# Also `bench/run.sh --store ...`. Other options go to bench/store/bench.py.
#
# Steps: pgcld in build-bench/ (deploy/build.sh build-bench --buildtype=release, as bench/run.sh) with
# its bench/audit_write; bench/throughput/loadgen and bench/throughput/forward into
# build-bench/bench-throughput/; then bench/store/bench.py. Needs postgresql-15 and python3-psycopg2
# (deploy/install-deps.sh --test). Loopback only; every server it starts is stopped by PID.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
build=1
for a in "$@"; do [ "$a" = "--no-build" ] && build=0; done
set -- $(for a in "$@"; do [ "$a" = "--no-build" ] || printf '%s\n' "$a"; done)

OUT="$ROOT/build-bench/bench-throughput"
if [ $build -eq 1 ]; then
  deploy/build.sh build-bench --buildtype=release >&2
  ninja -C build-bench bench/audit_write >&2
  mkdir -p "$OUT"
  CFLAGS="-std=c17 -O2 -g -Wall -Wextra -D_GNU_SOURCE"
  cc $CFLAGS -o "$OUT/loadgen" bench/throughput/loadgen.c
  # shellcheck disable=SC2046
  cc $CFLAGS -Icore -Icore/util -Icore/model -Icore/audit -Icore/review -Icore/score $(pkg-config --cflags openblas 2>/dev/null || echo -I/usr/include/x86_64-linux-gnu/openblas-pthread) \
     -o "$OUT/forward" bench/throughput/forward.c build-bench/core/libpgclcore.a \
     $(pkg-config --libs jansson sqlite3 libsodium libcrypto libpq) $(pkg-config --libs openblas 2>/dev/null || echo -lopenblas) -lpthread -lm
fi

PY=python3
[ -x /usr/bin/python3 ] && PY=/usr/bin/python3
exec "$PY" bench/store/bench.py --loadgen "$OUT/loadgen" --forward "$OUT/forward" \
  --pgcld "$ROOT/build-bench/server/pgcld" --audit-write "$ROOT/build-bench/bench/audit_write" "$@"
