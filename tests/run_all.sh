#!/bin/sh
# Builds pgcld twice (optimised, and with AddressSanitizer + UndefinedBehaviorSanitizer) and runs
# the whole test suite on both, then fuzzes (tests/fuzz/run.sh: a clang build, each harness for
# FUZZ_SECONDS, default 60). Prints meson's summaries and then one closing line
# "N passed, N failed, N skipped" over both builds and the fuzz targets. Exit status: 0 only if
# nothing failed.
set -u
cd "$(dirname "$0")/.."
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
python3 - build-test/meson-logs/testlog.json build-asan/meson-logs/testlog.json build-fuzz/fuzz-results.jsonl <<'PY'
import json, os, sys
counts = {"passed": 0, "failed": 0, "skipped": 0}
for path in sys.argv[1:]:
    if path.endswith("fuzz-results.jsonl") and not os.path.exists(path):
        counts["failed"] += 1  # tests/fuzz/run.sh did not get as far as writing its results
        continue
    with open(path) as f:
        for line in f:
            r = json.loads(line).get("result")
            if r in ("OK", "EXPECTEDFAIL"):
                counts["passed"] += 1
            elif r == "SKIP":
                counts["skipped"] += 1
            else:
                counts["failed"] += 1
print("%d passed, %d failed, %d skipped" % (counts["passed"], counts["failed"], counts["skipped"]))
PY
exit $status
