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


def main():
    node = shutil.which("node")
    if not os.access(CHROMIUM, os.X_OK):
        skip(f"{CHROMIUM} is not installed (deploy/install-deps.sh --test installs Debian's chromium)")
    if not node:
        skip("node is not installed (deploy/install-deps.sh --test installs Debian's nodejs)")
    if not os.path.isfile(os.path.join(HERE, "node_modules", "playwright-core", "package.json")):
        skip("tests/browser/node_modules/playwright-core is missing (deploy/install-deps.sh --test runs npm ci)")

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
