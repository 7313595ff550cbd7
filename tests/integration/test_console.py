"""The web console's routes and the public API data it needs, against the real daemon.

- GET /console, /console/ and /console/{file} serve the files of console/ byte for byte, with
  their Content-Type, a strict Content-Security-Policy, nosniff, no-referrer and no key; an
  unknown file is 404 not_found (JSON).
- GET /v1/decisions/{id} answers `nearest_prototypes`: the cosine similarity of the decision's
  vector to every class prototype of the version that decided (numpy reference from the
  checkpoint's tensors), most similar first, at most 10; null once that version is no longer
  loaded.

The browser test (tests/browser/run_console_test.py) drives the console itself.
"""
import os
import shutil
import tempfile
import unittest

import numpy as np

import harness as H

CONSOLE_DIR = os.path.join(H.SOURCE_ROOT, "console")
CSP_DIRECTIVES = ("default-src 'none'", "script-src 'self'", "style-src 'self'", "connect-src 'self'",
                  "form-action 'none'", "frame-ancestors 'none'", "base-uri 'none'")


class ConsoleRoutesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.daemon = H.start_daemon(cls, models=["tiny_binary"], default_model="tiny_binary")

    def check_console_headers(self, r):
        csp = r.headers.get("Content-Security-Policy") or ""
        for d in CSP_DIRECTIVES:
            self.assertIn(d, csp)
        self.assertNotIn("unsafe", csp)
        self.assertEqual(r.headers.get("X-Content-Type-Options"), "nosniff")
        self.assertEqual(r.headers.get("Referrer-Policy"), "no-referrer")
        self.assertEqual(r.headers.get("Cache-Control"), "no-cache")

    def test_index(self):
        with open(os.path.join(CONSOLE_DIR, "index.html"), "rb") as f:
            index = f.read()
        for path in ("/console", "/console/"):
            r = self.daemon.request("GET", path, key="")
            self.assertEqual(r.status, 200, r)
            self.assertEqual(r.content_type, "text/html")
            self.assertEqual(r.body, index)
            self.check_console_headers(r)

    def test_every_file_byte_for_byte(self):
        types = {".js": "text/javascript", ".css": "text/css", ".html": "text/html"}
        names = sorted(os.listdir(CONSOLE_DIR))
        self.assertIn("app.js", names)
        for name in names:
            with open(os.path.join(CONSOLE_DIR, name), "rb") as f:
                data = f.read()
            r = self.daemon.request("GET", f"/console/{name}", key="")
            self.assertEqual(r.status, 200, name)
            self.assertEqual(r.content_type, types[os.path.splitext(name)[1]], name)
            self.assertEqual(r.body, data, f"{name} differs from console/{name}: rebuild")
            self.check_console_headers(r)

    def test_unknown_file_and_methods(self):
        for path in ("/console/nope.js", "/console/..", "/console/%2e%2e%2fserver.h"):
            r = self.daemon.request("GET", path, key="")
            self.assertEqual((r.status, r.error_code()), (404, "not_found"), path)
        r = self.daemon.request("GET", "/console/a/b.js", key="")
        self.assertEqual((r.status, r.error_code()), (404, "not_found"))
        r = self.daemon.request("POST", "/console/app.js", {}, key="")
        self.assertEqual((r.status, r.error_code()), (405, "method_not_allowed"))
        self.assertEqual(r.headers.get("Allow"), "GET")

    def test_no_inline_script_or_style(self):
        with open(os.path.join(CONSOLE_DIR, "index.html"), encoding="utf-8") as f:
            html = f.read()
        self.assertNotRegex(html, r"<script>|<style|\sstyle=|\son[a-z]+=")
        for name in os.listdir(CONSOLE_DIR):
            if name.endswith(".js"):
                with open(os.path.join(CONSOLE_DIR, name), encoding="utf-8") as f:
                    js = f.read()
                for bad in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(",
                            "new Function", "localStorage"):
                    self.assertNotIn(bad, js, f"console/{name} uses {bad}")


def tiny_models(parent, versions):
    root = os.path.join(parent, "models")
    for v in versions:
        shutil.copytree(H.version_dir("tiny_multi"), os.path.join(root, "tiny", v))
    return root


class NearestPrototypesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="pgcld-proto-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, True)
        cls.daemon = H.start_daemon(cls, models=tiny_models(cls.tmp, ("1", "2")), default_model="tiny")
        cls.ref = H.ReferenceModel(H.version_dir("tiny_multi"))

    def test_nearest_prototypes(self):
        d = self.daemon
        r = d.request("POST", "/v1/admin/models/tiny/activate", {"version": "1"})
        self.assertEqual(r.status, 200, r)
        D = self.ref.config["dims"]["D"]
        r = d.score({"items": H.json_items(H.random_embeddings(3, D, 7), "p")})
        self.assertEqual(r.status, 200, r)
        ids = [x["decision_id"] for x in r.json["results"]]
        C = self.ref.t[self.ref.config["attention"]["prototypes"]]
        labels = self.ref.labels
        for decision_id in ids:
            rec = d.request("GET", f"/v1/decisions/{decision_id}", key=d.keys["reviewer"])
            self.assertEqual(rec.status, 200, rec)
            near = rec.json["nearest_prototypes"]
            v = np.asarray(rec.json["vector"], dtype=np.float64)
            sims = C @ v / (np.linalg.norm(C, axis=1) * np.linalg.norm(v))
            order = sorted(range(len(labels)), key=lambda k: (-sims[k], k))[:10]
            self.assertEqual([p["label_index"] for p in near], order)
            self.assertEqual([p["label"] for p in near], [labels[k] for k in order])
            for p in near:
                self.assertAlmostEqual(p["similarity"], sims[p["label_index"]], places=5)
            self.assertEqual([p["similarity"] for p in near], sorted((p["similarity"] for p in near), reverse=True))
        # Version 2 has the same weights but is another version: v1's prototypes are no longer loaded.
        r = d.request("POST", "/v1/admin/models/tiny/activate", {"version": "2"})
        self.assertEqual(r.status, 200, r)
        rec = d.request("GET", f"/v1/decisions/{ids[0]}", key=d.keys["reviewer"])
        self.assertEqual(rec.status, 200, rec)
        self.assertIsNone(rec.json["nearest_prototypes"])
        # Attached as a shadow, v1 is loaded again.
        r = d.request("POST", "/v1/admin/models/tiny/shadow", {"version": "1"})
        self.assertEqual(r.status, 200, r)
        rec = d.request("GET", f"/v1/decisions/{ids[0]}", key=d.keys["reviewer"])
        self.assertEqual(len(rec.json["nearest_prototypes"]), min(10, len(labels)))


if __name__ == "__main__":
    H.main()
