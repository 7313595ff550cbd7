#!/usr/bin/python3
"""End-to-end test of the web console (/console/) in headless Chromium against a real pgcld.

Starts the daemon with tests/integration/harness.py (temporary audit database, one key per role,
a second reviewer key, model `toxicity` at versions 1 and 2), makes real decisions through
POST /v1/score — among them one whose item id is an XSS probe — and runs
tests/browser/console.test.mjs (playwright-core driving Debian's /usr/bin/chromium), passing it
the base URL, the keys and the screenshot directory in the environment. Exits with the node
script's status. Chromium, node and tests/browser/node_modules come from deploy/install-deps.sh
--test: where one is missing (or node is too old) it exits 77 (skipped) when run by hand and 1
(failed) under tests/run_all.sh (PGCLD_REQUIRE_SUITE_DEPS=1, tests/integration/skips.py) — except
node_modules when install-deps.sh could not reach the npm registry (tests/browser/.npm-ci-failed
holds npm's reason): then it skips with that reason everywhere.

Environment: PGCLD_BIN, PGCLD_SOURCE_ROOT (as for the integration tests), PGCLD_ARTEFACTS (where
the screenshots go; default: a temporary directory that is kept).
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, os.pardir, "integration"))

import skips  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
XSS = "<img src=x onerror=alert(1)>"
NODE_TIMEOUT_S = 900


def missing(why):
    """A suite dependency is missing or unusable: skipped by hand, failed under tests/run_all.sh."""
    skips.missing_for_program(why)


NPM_FAILED_NOTE = os.path.join(HERE, ".npm-ci-failed")


def missing_modules(what, hint):
    """node_modules lacks what the lock file names. When deploy/install-deps.sh --test could not run
    npm ci (no npm registry: it goes on without the optional browser test and leaves npm's reason in
    tests/browser/.npm-ci-failed), that is an environment limit: a skip with the reason, under
    tests/run_all.sh too. Otherwise it is a missing suite dependency: missing(f"{what} ({hint})")."""
    try:
        with open(NPM_FAILED_NOTE, encoding="utf-8") as f:
            npm_failed = f.read().strip()
    except FileNotFoundError:
        missing(f"{what} ({hint})")
        return
    skips.skip_program(f"{what}: deploy/install-deps.sh --test went on without it, {npm_failed or 'npm ci failed'} "
                       "(run it again where the npm registry can be reached)")


# Whether node (process.version) satisfies the npm range in argv[1], by npm's own semver package
# (tests/browser/node_modules): exit 0 yes, 1 no, 3 when the range cannot be read.
SEMVER_CHECK = ("const semver = require('semver'); const range = semver.validRange(process.argv[1]);"
                " process.exit(range === null ? 3 : semver.satisfies(process.version, range) ? 0 : 1);")


def check_node(node):
    """Calls missing() unless node_modules holds the locked playwright-core and semver, and node
    satisfies what the lock file records for playwright-core (engines.node)."""
    with open(os.path.join(HERE, "package-lock.json"), encoding="utf-8") as f:
        packages = json.load(f)["packages"]
    locked = packages["node_modules/playwright-core"]
    for name in ("playwright-core", "semver"):
        manifest = os.path.join(HERE, "node_modules", name, "package.json")
        if not os.path.isfile(manifest):
            missing_modules(f"tests/browser/node_modules/{name} is missing", "deploy/install-deps.sh --test runs npm ci")
        with open(manifest, encoding="utf-8") as f:
            installed = json.load(f).get("version")
        if installed != packages[f"node_modules/{name}"]["version"]:
            missing_modules(f"tests/browser/node_modules has {name} {installed}, package-lock.json locks "
                            f"{packages[f'node_modules/{name}']['version']}", "deploy/install-deps.sh --test runs npm ci again")
    version = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=60).stdout.strip()
    spec = (locked.get("engines") or {}).get("node")
    if not spec:
        return
    out = subprocess.run([node, "-e", SEMVER_CHECK, spec], cwd=HERE, capture_output=True, text=True, timeout=60)
    if out.returncode == 3:
        print(f"warning: cannot read engines.node {spec!r} of playwright-core in package-lock.json; "
              f"trying node {version} anyway", flush=True)
    elif out.returncode == 1:
        missing(f"node {version} ({node}) is too old: playwright-core {locked['version']} in "
             f"tests/browser/package-lock.json needs node {spec}")
    elif out.returncode != 0:
        missing(f"{node} could not check its version against {spec!r}: {out.stderr.strip()[-300:]}")


def main():
    node = shutil.which("node")
    if not os.access(CHROMIUM, os.X_OK):
        missing(f"{CHROMIUM} is not installed (deploy/install-deps.sh --test installs Debian's chromium)")
    if not node:
        missing("node is not installed (deploy/install-deps.sh --test installs Debian's nodejs)")
    check_node(node)

    import harness as H  # numpy: Debian's python3

    shots = os.environ.get("PGCLD_ARTEFACTS") or tempfile.mkdtemp(prefix="pgcld-console-shots-")
    os.makedirs(shots, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="pgcld-console-")
    try:
        models = os.path.join(tmp, "models", "toxicity")
        for v in ("1", "2"):  # two versions of the bundled model, so that the operator can activate one
            shutil.copytree(H.version_dir("toxicity", "1"), os.path.join(models, v))
        d = H.Daemon(models=os.path.join(tmp, "models"), default_model="toxicity")
        try:
            d.start()
            d.request("POST", "/v1/admin/models/toxicity/activate", {"version": "1"})
            second = d.create_key("reviewer", "appeals lead")
            items = []
            for n in (1, 2, 3, 4):
                with open(os.path.join(H.SOURCE_ROOT, "docs", "examples", f"toxic-{n}.json"), encoding="utf-8") as f:
                    items += json.load(f)["items"]
            probe = dict(items[0], id=XSS)  # a toxic comment's embedding under a hostile item id
            for batch in (items[:6], items[6:], [probe]):
                r = d.score({"items": batch})
                if r.status != 200:
                    raise RuntimeError(f"scoring for the fixture failed: {r}")
            score_body = os.path.join(tmp, "score.json")  # for the operator's "it serves" check
            with open(score_body, "w", encoding="utf-8") as f:
                json.dump({"items": items[:3]}, f)
            env = dict(os.environ,
                       PGCLD_URL=f"http://127.0.0.1:{d.port}", PGCLD_SCORER_KEY=d.keys["scorer"],
                       PGCLD_REVIEWER_KEY=d.keys["reviewer"], PGCLD_REVIEWER2_KEY=second,
                       PGCLD_ADMIN_KEY=d.keys["admin"], PGCLD_XSS=XSS, PGCLD_SCREENSHOTS=shots,
                       PGCLD_CHROMIUM=CHROMIUM, PGCLD_SCORE_BODY=score_body)
            print(f"pgcld on port {d.port}; screenshots in {shots}", flush=True)
            try:
                rc = subprocess.run([node, os.path.join(HERE, "console.test.mjs")], env=env, cwd=HERE,
                                    stdin=subprocess.DEVNULL, timeout=NODE_TIMEOUT_S).returncode
            except subprocess.TimeoutExpired:
                print(f"FAIL: console.test.mjs did not finish within {NODE_TIMEOUT_S} s")
                rc = 1
            if rc != 0:
                print(d.logs())
        finally:
            d.cleanup(check=True)
        return rc
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
