#!/bin/sh
# Throughput bench (issue 6): pgcld against the FastAPI + PyTorch peer (bench/peer/), one command.
#   bench/run.sh            full run (~10 min on 2 idle cores, at most ~13): writes bench/results/*.json and the section
#                           "## Throughput (issue 6)" of bench/RESULTS.md
#   bench/run.sh --quick    smoke check (< 3 min): bench/results/quick/*.json, Markdown to stdout only
#   bench/run.sh --no-deps  skip bench/install-deps.sh (no root needed when everything is installed)
#   bench/run.sh --store    the store as a dimension instead (issue 17): bench/store.sh, SQLite against
#                           one and two replicas on PostgreSQL (the other options go to it)
# Other options go to bench/throughput/bench.py (--keep-work keeps the temporary databases and logs).
#
# Steps: bench/install-deps.sh; pgcld in build-bench/ (deploy/build.sh build-bench --buildtype=release,
# and build-bench-cpu/ with -Dcuda=disabled beside it when that build links CUDA);
# bench/throughput/loadgen and bench/throughput/forward (linked against build-bench's libpgclcore.a)
# into build-bench/bench-throughput/; then bench/throughput/bench.py. Loopback only; every server it
# starts is stopped at the end (SIGTERM by PID).
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
if [ "${1:-}" = "--store" ]; then shift; exec bench/store.sh "$@"; fi
deps=1
for a in "$@"; do [ "$a" = "--no-deps" ] && deps=0; done
if [ $deps -eq 1 ]; then bench/install-deps.sh >&2; fi
set --  $(for a in "$@"; do [ "$a" = "--no-deps" ] || printf '%s\n' "$a"; done)

deploy/build.sh build-bench --buildtype=release >&2
OUT="$ROOT/build-bench/bench-throughput"
mkdir -p "$OUT"
CFLAGS="-std=c17 -O2 -g -Wall -Wextra -D_GNU_SOURCE"
cc $CFLAGS -o "$OUT/loadgen" bench/throughput/loadgen.c
# shellcheck disable=SC2046
cc $CFLAGS -Icore -Icore/util -Icore/model -Icore/audit -Icore/review -Icore/score $(pkg-config --cflags openblas 2>/dev/null || echo -I/usr/include/x86_64-linux-gnu/openblas-pthread) \
   -o "$OUT/forward" bench/throughput/forward.c build-bench/core/libpgclcore.a \
   $(pkg-config --libs jansson sqlite3 libsodium libcrypto) $(pkg-config --libs openblas 2>/dev/null || echo -lopenblas) -lpthread -lm

# When the default build links CUDA (the toolkit is installed) a CPU-only build is measured beside it.
CPU_ONLY=""
if ldd build-bench/server/pgcld 2>/dev/null | grep -q libcudart; then
  deploy/build.sh build-bench-cpu --buildtype=release -Dcuda=disabled >&2
  CPU_ONLY="--pgcld-cpu $ROOT/build-bench-cpu/server/pgcld"
fi

PY=python3
[ -x /usr/bin/python3 ] && PY=/usr/bin/python3
exec "$PY" bench/throughput/bench.py --loadgen "$OUT/loadgen" --forward "$OUT/forward" \
  --pgcld "$ROOT/build-bench/server/pgcld" $CPU_ONLY "$@"
