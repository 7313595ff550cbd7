#!/bin/sh
# Builds the libFuzzer harnesses of tests/fuzz with clang (AddressSanitizer + UndefinedBehaviorSanitizer,
# coverage on every C file) in their own build directory and runs each for a bounded time on a copy
# of its committed seed corpus (tests/fuzz/corpus/<target>/, which stays small).
#   tests/fuzz/run.sh [TARGET...]       default: every target
# Environment:
#   FUZZ_SECONDS    seconds per target (default 60)
#   FUZZ_BUILD_DIR  build directory (default build-fuzz)
#   FUZZ_RESULTS    JSON lines file written with one {"name", "result", "executions", "crashes"} per
#                   target, in meson's testlog format (default $FUZZ_BUILD_DIR/fuzz-results.jsonl)
# Prints one line per target and a closing summary line; exit status 0 only if every target built
# and ran without a crash. Crashing inputs are kept in $FUZZ_BUILD_DIR/fuzz-artifacts/.
set -u
cd "$(dirname "$0")/../.."
seconds=${FUZZ_SECONDS:-60}
dir=${FUZZ_BUILD_DIR:-build-fuzz}
targets=${*:-fuzz_score fuzz_v2 fuzz_checkpoint fuzz_daemon fuzz_note fuzz_record fuzz_tiles}
mkdir -p "$dir"
results=${FUZZ_RESULTS:-$dir/fuzz-results.jsonl}
: >"$results"

record() { # name result executions crashes
  printf '{"name": "%s", "result": "%s", "executions": %s, "crashes": %s}\n' "$1" "$2" "$3" "$4" >>"$results"
}

options="-Dfuzz=true -Dbuildtype=debugoptimized -Db_sanitize=address,undefined -Db_lundef=false -Dcuda=disabled"
built=1
if [ -f "$dir/meson-private/coredata.dat" ]; then
  # shellcheck disable=SC2086
  meson setup --reconfigure "$dir" $options "-Dc_args=-fsanitize=fuzzer-no-link" >"$dir/fuzz-setup.log" 2>&1 || built=0
else
  # shellcheck disable=SC2086
  CC=clang meson setup "$dir" $options "-Dc_args=-fsanitize=fuzzer-no-link" >"$dir/fuzz-setup.log" 2>&1 || built=0
fi
# shellcheck disable=SC2086
[ $built = 1 ] && { meson compile -C "$dir" $targets >"$dir/fuzz-build.log" 2>&1 || built=0; }
if [ $built = 0 ]; then
  tail -n 40 "$dir/fuzz-setup.log" "$dir/fuzz-build.log" 2>/dev/null
  for t in $targets; do
    echo "$t: FAILED to build"
    record "$t" FAIL 0 0
  done
  echo "fuzz: build failed"
  exit 1
fi

status=0
total_runs=0
total_crashes=0
artifacts="$dir/fuzz-artifacts"
mkdir -p "$artifacts"
for t in $targets; do
  work=$(mktemp -d "${TMPDIR:-/tmp}/pgcld-$t-XXXXXX")
  mkdir -p "$work/corpus"
  [ -d "tests/fuzz/corpus/$t" ] && cp -R "tests/fuzz/corpus/$t/." "$work/corpus/"
  # The daemon harnesses run server threads across inputs: per-input leak checks would only
  # slow them down (the sanitizer test suite checks the daemon for leaks).
  case $t in fuzz_v2 | fuzz_daemon) leaks=0 ;; *) leaks=1 ;; esac
  # The dictionaries (tests/fuzz/*.dict): libFuzzer takes one, so the daemon's is HTTP + JSON.
  case $t in
    fuzz_daemon) cat tests/fuzz/http.dict tests/fuzz/json.dict >"$work/dict" ;;
    fuzz_checkpoint) cp tests/fuzz/checkpoint.dict "$work/dict" ;;
    fuzz_note) cp tests/fuzz/note.dict "$work/dict" ;;
    fuzz_tiles) cp tests/fuzz/tiles.dict "$work/dict" ;;
    *) cp tests/fuzz/json.dict "$work/dict" ;;
  esac
  # TMPDIR: the daemon harnesses' database and models go under $work (kept with the log on a crash).
  TMPDIR=$work ASAN_OPTIONS=abort_on_error=1:detect_leaks=$leaks UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "$dir/tests/fuzz/$t" -max_total_time="$seconds" -timeout=30 -rss_limit_mb=2048 -print_final_stats=1 \
    -detect_leaks=$leaks -dict="$work/dict" -artifact_prefix="$artifacts/$t-" "$work/corpus" >"$work/log" 2>&1
  rc=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *\([0-9]*\).*/\1/p' "$work/log" | tail -n 1)
  [ -n "$runs" ] || runs=$(sed -n 's/.*#\([0-9][0-9]*\).*/\1/p' "$work/log" | tail -n 1)
  [ -n "$runs" ] || runs=0
  crashes=0
  if [ $rc -ne 0 ]; then
    crashes=1
    status=1
    echo "--- $t: exit status $rc; the end of its log ($work/log):"
    tail -n 60 "$work/log"
    record "$t" FAIL "$runs" 1
    echo "$t: $runs executions in ${seconds}s, CRASH (input kept in $artifacts/)"
  else
    record "$t" OK "$runs" 0
    echo "$t: $runs executions in ${seconds}s, 0 crashes"
    rm -rf "$work"
  fi
  total_runs=$((total_runs + runs))
  total_crashes=$((total_crashes + crashes))
done
n=$(echo $targets | wc -w)
echo "fuzz: $n targets, $total_runs executions, $total_crashes crashes (${seconds}s per target)"
exit $status
