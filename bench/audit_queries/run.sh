#!/bin/sh
# Audit-query benchmark (issue 5): builds a 1,000,000-decision audit database in /tmp (schema from
# `pgcld keys create`, rows from make_db.py), starts pgcld on it with --auth off, and measures the
# reviewer reads (bench.py). Prints Markdown; the figures in bench/RESULTS.md come from it.
#
#   bench/audit_queries/run.sh [--reuse]
#
#   --reuse                 keep an existing database at $PGCLD_BENCH_DB instead of rebuilding it
#   PGCLD_BENCH_DB=FILE     database path (default /tmp/pgcld-bench-audit.db; never inside the repo)
#   PGCLD_BENCH_ROWS=N      decisions to generate (default 1000000)
#
# Needs: a configured build/ (meson setup build), cc, pkg-config, python3 (standard library only).
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
DB=${PGCLD_BENCH_DB:-/tmp/pgcld-bench-audit.db}
ROWS=${PGCLD_BENCH_ROWS:-1000000}
BIN="$ROOT/build/server/pgcld"
PY=python3
[ -x /usr/bin/python3 ] && PY=/usr/bin/python3
WORK=$(mktemp -d /tmp/pgcld-bench-XXXXXX)
PID=""
cleanup() {
    if [ -n "$PID" ]; then kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; fi
    rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

ninja -C "$ROOT/build" server/pgcld core/libpgclcore.a >&2
cc -std=c17 -O2 -D_GNU_SOURCE -I"$ROOT/core" -I"$ROOT/core/util" -I"$ROOT/core/model" -I"$ROOT/core/audit" -I"$ROOT/core/review" -I"$ROOT/core/score" "$HERE/explain.c" "$ROOT/build/core/libpgclcore.a" \
   $(pkg-config --libs jansson sqlite3 libsodium libcrypto) -lpthread -lm -o "$WORK/explain"

if [ "${1:-}" != "--reuse" ] || [ ! -s "$DB" ]; then
    rm -f "$DB" "$DB-wal" "$DB-shm"
    t0=$(date +%s)
    "$BIN" keys create --db "$DB" --role admin --name bench >/dev/null 2>&1   # applies the migrations
    "$PY" "$HERE/make_db.py" "$DB" --rows "$ROWS" >&2
    echo "database built in $(( $(date +%s) - t0 )) s" >&2
fi

"$BIN" serve --listen 127.0.0.1:0 --port-file "$WORK/port" --models "$ROOT/models" --db "$DB" --auth off \
    --log-level warn 2>"$WORK/pgcld.log" &
PID=$!
i=0
while [ ! -s "$WORK/port" ]; do
    i=$((i + 1))
    if [ $i -gt 200 ] || ! kill -0 "$PID" 2>/dev/null; then cat "$WORK/pgcld.log" >&2; exit 1; fi
    sleep 0.1
done

echo "## Audit queries (issue 5)"
echo
echo "Machine: $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')), $(free -g | awk '/Mem:/ {print $2}') GiB RAM;" \
     "SQLite $(sqlite3 --version 2>/dev/null | cut -d' ' -f1 || echo '?'); $(date -u +%Y-%m-%d)."
echo "Command: \`bench/audit_queries/run.sh\` (database: $DB, $(du -m "$DB" | cut -f1) MiB)."
echo
"$PY" "$HERE/bench.py" --db "$DB" --port "$(cat "$WORK/port")" --pid "$PID" --explain "$WORK/explain"
