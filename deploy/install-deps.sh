#!/bin/sh
# Installs pgcld's build and run dependencies from Debian's packages (bookworm or later).
#   deploy/install-deps.sh          what building and running the daemon needs
#   deploy/install-deps.sh --test   that, plus what the test suite needs
# Used by the README's two set-up commands and by the Dockerfile, so all three stay the same path.
# Why each package is here: see "Dependencies" in README.md.
# It prints one line per phase (what it installs, by name); apt's own output is kept quiet. Without
# the npm registry (the browser test's node modules), --test still succeeds: it says so in one line
# and records why in tests/browser/.npm-ci-failed, and the browser test skips with that reason.
set -eu
# curl and sqlite3: the README's "Try it" (score with curl, read the audit rows with sqlite3)
packages="ca-certificates build-essential pkg-config meson ninja-build python3
  libmicrohttpd-dev libjansson-dev libutf8proc-dev libopenblas-dev libsqlite3-dev libsodium-dev libssl-dev libpq-dev
  libcurl4-openssl-dev libsystemd-dev curl sqlite3"
if [ "${1:-}" = "--test" ]; then
  packages="$packages openssl python3-numpy python3-yaml python3-jsonschema python3-torch python3-sklearn
    clang libclang-rt-14-dev"
  # groff -man -ww: the generated man page (build/server/pgcld.1) is valid roff (test_cli_help)
  packages="$packages groff-base"
  # promtool (Debian's prometheus package): `promtool check metrics` on the live /metrics
  # (test_metrics_conventions); with --no-install-recommends nothing else of Prometheus comes along
  packages="$packages prometheus"
  # systemd-analyze, for the unit file's check (test_deploy_files); without --install-recommends it
  # does not replace the init system, and in a container its maintainer scripts start nothing.
  # procps: /bin/kill, the unit's ExecReload, which `systemd-analyze verify` requires to exist
  packages="$packages systemd procps"
  # the PostgreSQL store's tests: a real server (throw-away clusters made with pg_createcluster,
  # tests/integration/pg_cluster.py) and psycopg2 to read what the daemons wrote
  packages="$packages postgresql-15 postgresql-common python3-psycopg2"
  # the test witness (tests/tlog/witness.py, c2sp.org/tlog-witness): Ed25519 cosignatures in Python
  packages="$packages python3-cryptography"
  # the transparency log's stock verifier (issue 28): tests/tlog/verify_tiles checks pgcld's tiles,
  # checkpoints and proofs with Go's own golang.org/x/mod/sumdb/tlog and sumdb/note, built offline in
  # GOPATH mode (GO111MODULE=off GOPATH=/usr/share/gocode) from these two packages
  packages="$packages golang-go golang-golang-x-mod-dev"
  # the console's browser test: Debian's Chromium driven by playwright-core (npm, tests/browser)
  # (npm only where no npm is installed: a nodejs package that bundles npm conflicts with Debian's)
  packages="$packages chromium nodejs fonts-dejavu-core"
  command -v npm >/dev/null 2>&1 || packages="$packages npm"
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: run as root (apt-get needs it)" >&2
  exit 1
fi
# install_browser_modules DIR: playwright-core only (no browser download; it drives /usr/bin/chromium).
# npm ci runs when DIR/node_modules lacks it or when package.json/package-lock.json changed since the
# last npm ci (their SHA-256, kept in node_modules/.pgcld-lock-sha256); otherwise nothing is done.
# A failed npm ci (no registry, no network) is not fatal: the browser test is optional, so this
# says so in one line and leaves the reason in DIR/.npm-ci-failed, which tests/browser/
# run_console_test.py reports when it skips for want of node_modules. A success removes that file.
install_browser_modules() {
  browser=$1
  failed_note="$browser/.npm-ci-failed"
  lock_sum="$(cat "$browser/package.json" "$browser/package-lock.json" | sha256sum | cut -d' ' -f1)"
  if [ -f "$browser/node_modules/playwright-core/package.json" ] &&
     [ "$(cat "$browser/node_modules/.pgcld-lock-sha256" 2>/dev/null)" = "$lock_sum" ]; then
    echo "install-deps: tests/browser/node_modules up to date (package-lock.json)"
    rm -f "$failed_note"
    return 0
  fi
  echo "install-deps: npm ci in tests/browser (playwright-core, for the optional browser test)"
  npm_log=$(mktemp)
  if npm ci --prefix "$browser" --no-audit --no-fund >"$npm_log" 2>&1; then
    echo "$lock_sum" >"$browser/node_modules/.pgcld-lock-sha256"
    rm -f "$failed_note" "$npm_log"
    return 0
  fi
  # npm's own words for the cause: its "reason:" (a fetch error) or its error code, else its last line
  why=$(grep -m 1 -o 'reason: .*' "$npm_log" || grep -m 1 -E '(ERR!|error) code' "$npm_log" || tail -n 1 "$npm_log")
  why="npm ci failed ($(printf '%s' "$why" | sed -E 's/^npm (ERR!|error) //' | cut -c1-200); registry $(npm config get registry 2>/dev/null))"
  rm -f "$npm_log"
  echo "$why" >"$failed_note"
  echo "install-deps: $why: the browser test (tests/browser) will skip; everything else is installed"
}
export DEBIAN_FRONTEND=noninteractive
missing=""
for p in $packages; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
# shellcheck disable=SC2086
n_packages=$(echo $packages | wc -w) && n_missing=$(echo $missing | wc -w)
if [ "$n_missing" -gt 0 ]; then
  echo "install-deps: apt-get update"
  apt-get update -qq
  # shellcheck disable=SC2086
  echo "install-deps: apt-get install"$missing "($n_missing of $n_packages packages missing)"
  # shellcheck disable=SC2086
  apt-get install -y -qq --no-install-recommends $packages >/dev/null
else
  echo "install-deps: all $n_packages Debian packages already installed"
fi
if [ "${1:-}" = "--test" ]; then
  install_browser_modules "$(dirname "$0")/../tests/browser"
fi
echo "install-deps: dependencies present"
