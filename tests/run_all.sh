#!/bin/sh
# Builds pgcld twice (optimised, and with AddressSanitizer + UndefinedBehaviorSanitizer) and runs
# the whole test suite on both, every meson suite (the 'postgresql' one too: throw-away PostgreSQL 15
# clusters, docs/testing.md), then fuzzes (tests/fuzz/run.sh: a clang build, each harness for
# FUZZ_SECONDS, default 60). Prints meson's summaries, every skip with its test and reason, and then
# one closing line "N passed, N failed, N skipped (W whole tests, C cases inside tests that ran)" over
# both builds and the fuzz targets (tests/closing_summary.py; docs/testing.md, "Skips"). Exit status:
# 0 only if nothing failed.
set -u
cd "$(dirname "$0")/.."
# A test that lacks something deploy/install-deps.sh --test installs (openssl, curl, Chromium, node
# modules, systemd-analyze, torch, ...) or that the build makes FAILS here instead of skipping
# (tests/integration/skips.py); only environment limits (no GPU, no ../shared/data, ...) skip.
export PGCLD_REQUIRE_SUITE_DEPS=1
status=0
deploy/build.sh build-test --buildtype=debugoptimized || exit 1
meson test -C build-test --print-errorlogs --num-processes 2 || status=1
deploy/build.sh build-asan --buildtype=debug -Db_sanitize=address,undefined -Db_lundef=false \
  -Dc_args=-fno-sanitize-recover=all || exit 1
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  meson test -C build-asan --print-errorlogs --num-processes 2 --timeout-multiplier 3 || status=1
# Fuzzing: each libFuzzer harness of tests/fuzz for FUZZ_SECONDS (default 60) in a third, clang build
# (build-fuzz); one result per target, in meson's testlog format, counted in the closing line.
rm -f build-fuzz/fuzz-results.jsonl
FUZZ_RESULTS=build-fuzz/fuzz-results.jsonl tests/fuzz/run.sh || status=1
# Every skip with its reason (whole tests and cases inside tests), then the closing line.
/usr/bin/python3 tests/closing_summary.py build-test/meson-logs/testlog.json \
  build-asan/meson-logs/testlog.json build-fuzz/fuzz-results.jsonl
exit $status
