#!/bin/sh
# Installs pgcld's build and run dependencies from Debian's packages (bookworm or later).
#   deploy/install-deps.sh          what building and running the daemon needs
#   deploy/install-deps.sh --test   that, plus what the test suite needs
# Used by the README's two set-up commands and by the Dockerfile, so all three stay the same path.
# Why each package is here: see "Dependencies" in README.md.
set -eu
packages="ca-certificates build-essential pkg-config meson ninja-build python3
  libmicrohttpd-dev libjansson-dev libopenblas-dev libsqlite3-dev libsodium-dev libssl-dev libpq-dev
  libsystemd-dev"
if [ "${1:-}" = "--test" ]; then
  packages="$packages sqlite3 curl openssl python3-numpy python3-yaml python3-jsonschema python3-torch python3-sklearn
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
  # the console's browser test: Debian's Chromium driven by playwright-core (npm, tests/browser)
  # (npm only where no npm is installed: a nodejs package that bundles npm conflicts with Debian's)
  packages="$packages chromium nodejs fonts-dejavu-core"
  command -v npm >/dev/null 2>&1 || packages="$packages npm"
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps.sh: run as root (apt-get needs it)" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
missing=""
for p in $packages; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$(echo $missing)" ]; then
  apt-get update -qq
  # shellcheck disable=SC2086
  apt-get install -y -qq --no-install-recommends $packages >/dev/null
fi
if [ "${1:-}" = "--test" ]; then
  # playwright-core only (no browser download): it drives /usr/bin/chromium. npm ci runs when
  # node_modules lacks it or when package.json/package-lock.json changed since the last npm ci
  # (their SHA-256, kept in node_modules/.pgcld-lock-sha256); otherwise nothing is done.
  browser="$(dirname "$0")/../tests/browser"
  lock_sum="$(cat "$browser/package.json" "$browser/package-lock.json" | sha256sum | cut -d' ' -f1)"
  if [ ! -f "$browser/node_modules/playwright-core/package.json" ] ||
     [ "$(cat "$browser/node_modules/.pgcld-lock-sha256" 2>/dev/null)" != "$lock_sum" ]; then
    npm ci --prefix "$browser" --no-audit --no-fund >/dev/null
    echo "$lock_sum" >"$browser/node_modules/.pgcld-lock-sha256"
  fi
fi
echo "install-deps.sh: dependencies present"
