#!/usr/bin/python3
"""End-to-end test of the web console (/console/) in headless Chromium against a real pgcld.

Starts the daemon with tests/integration/harness.py (temporary audit database, one key per role,
a second reviewer key, model `toxicity` at versions 1 and 2), makes real decisions through
POST /v1/score — among them one whose item id is an XSS probe — and runs
tests/browser/console.test.mjs (playwright-core driving Debian's /usr/bin/chromium), passing it
the base URL, the keys and the screenshot directory in the environment. Exits with the node
script's status; 77 (skipped) when Chromium, node or tests/browser/node_modules is missing
(install them with deploy/install-deps.sh --test).

Environment: PGCLD_BIN, PGCLD_SOURCE_ROOT (as for the integration tests), PGCLD_ARTEFACTS (where
the screenshots go; default: a temporary directory that is kept).
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, os.pardir, "integration"))

CHROMIUM = "/usr/bin/chromium"
XSS = "<img src=x onerror=alert(1)>"
NODE_TIMEOUT_S = 900


def skip(why):
    print(f"SKIP: {why}")
    sys.exit(77)


def parse_version(text):
    """'v18.20.4' -> (18, 20, 4); missing parts are 0. None when it is not a version."""
    m = re.fullmatch(r"v?(\d+)(?:\.(\d+))?(?:\.(\d+))?(?:[-+].*)?", text.strip())
    return tuple(int(g or 0) for g in m.groups()) if m else None


def comparator_holds(comp, have):
    """One npm semver comparator (>=18, >16.2, <21, <=20.1, =20, 20, 20.x, ^18.17, ~18.19) against
    have (a 3-tuple). Raises ValueError for a form it does not know."""
    m = re.fullmatch(r"(>=|<=|>|<|=|\^|~)?v?(\d+)(?:\.(\d+|[xX*]))?(?:\.(\d+|[xX*]))?", comp)
    if not m:
        raise ValueError(comp)
    op, parts = m.group(1) or "", [m.group(2), m.group(3), m.group(4)]
    given = 0
    for p in parts:  # how many leading parts are numbers (18.x and 18 both fix only the major)
        if p is None or not p.isdigit():
            break
        given += 1
    want = tuple(int(p) if i < given else 0 for i, p in enumerate(parts))
    if op == ">=":
        return have >= want
    if op == ">":  # >18 means >=19, >18.2 means >=18.3 (npm's reading of partial versions)
        return have > want if given == 3 else have[:given] > want[:given]
    if op == "<":
        return have < want
    if op == "<=":
        return have <= want if given == 3 else have[:given] <= want[:given]
    if op == "^":  # same leftmost non-zero part, at least want
        lead = next((i for i, v in enumerate(want[:given]) if v), max(0, given - 1))
        return have >= want and have[:lead + 1] == want[:lead + 1]
    if op == "~":  # same major and (when given) minor, at least want
        return have >= want and have[:max(1, min(given, 2))] == want[:max(1, min(given, 2))]
    return have[:given] == want[:given]  # = or bare: an exact or partial (x-range) match


def satisfies(have, spec):
    """Whether version have satisfies an npm range (comparators joined by spaces, sets by ||)."""
    for alternative in spec.split("||"):
        comps = alternative.replace(">= ", ">=").replace("<= ", "<=").replace("> ", ">").replace("< ", "<").split()
        if not comps or comps == ["*"]:
            return True
        if all(comparator_holds(c, have) for c in comps):
            return True
    return False


def check_node(node):
    """Skips unless node satisfies what the lock file records for playwright-core (engines.node),
    and unless node_modules holds the locked playwright-core version."""
    with open(os.path.join(HERE, "package-lock.json"), encoding="utf-8") as f:
        locked = json.load(f)["packages"]["node_modules/playwright-core"]
    spec = (locked.get("engines") or {}).get("node")
    out = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=60)
    have = parse_version(out.stdout)
    if out.returncode != 0 or have is None:
        skip(f"{node} --version did not print a version ({out.stdout.strip()!r} {out.stderr.strip()!r})")
    if spec:
        try:
            ok = satisfies(have, spec)
        except ValueError as e:
            print(f"warning: cannot read engines.node {spec!r} of playwright-core in package-lock.json "
                  f"(comparator {e}); trying node {out.stdout.strip()} anyway", flush=True)
            ok = True
        if not ok:
            skip(f"node {out.stdout.strip()} ({node}) is too old: playwright-core {locked['version']} in "
                 f"tests/browser/package-lock.json needs node {spec}")
    with open(os.path.join(HERE, "node_modules", "playwright-core", "package.json"), encoding="utf-8") as f:
        installed = json.load(f).get("version")
    if installed != locked["version"]:
        skip(f"tests/browser/node_modules has playwright-core {installed}, package-lock.json locks "
             f"{locked['version']} (deploy/install-deps.sh --test runs npm ci again)")


def main():
    node = shutil.which("node")
    if not os.access(CHROMIUM, os.X_OK):
        skip(f"{CHROMIUM} is not installed (deploy/install-deps.sh --test installs Debian's chromium)")
    if not node:
        skip("node is not installed (deploy/install-deps.sh --test installs Debian's nodejs)")
    if not os.path.isfile(os.path.join(HERE, "node_modules", "playwright-core", "package.json")):
        skip("tests/browser/node_modules/playwright-core is missing (deploy/install-deps.sh --test runs npm ci)")
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
