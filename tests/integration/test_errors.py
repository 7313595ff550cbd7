#!/usr/bin/python3
"""Every error of the pgcld contract, against a real daemon: status, code, item index, and that a
rejected request writes no audit row.

Run: /usr/bin/python3 tests/integration/test_errors.py
"""

import base64
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

import harness as H  # noqa: E402

BAD_REQUEST = 400


class ErrorChecks:
    daemon = None

    def assertError(self, resp, status, code, item=None, what=""):
        """``code`` may be a string or a set of acceptable codes (for cases the contract leaves
        open). ``item`` (an index) must then be reported in "item" and in the message."""
        msg = f"{what}: got {resp}"
        self.assertEqual(resp.status, status, msg)
        self.assertEqual(resp.content_type, "application/json", msg)
        self.assertIsInstance(resp.json, dict, msg)
        self.assertIn("error", resp.json, msg)
        err = resp.json["error"]
        self.assertIsInstance(err, dict, msg)
        codes = {code} if isinstance(code, str) else set(code)
        self.assertIn(err.get("code"), codes, msg)
        self.assertIsInstance(err.get("message"), str, msg)
        self.assertTrue(err["message"], msg)
        self.assertLessEqual(set(err), {"code", "message", "item", "field"}, msg)
        if "item" in err:
            self.assertIsInstance(err["item"], int, msg)
            self.assertNotIsInstance(err["item"], bool, msg)
        if "field" in err:
            self.assertIsInstance(err["field"], str, msg)
        if item is not None:
            self.assertEqual(err.get("item"), item, f"{what}: error should name item {item}: {resp}")
            self.assertIn(str(item), err["message"], f"{what}: message should name item {item}")
            if "field" in err:
                self.assertTrue(err["field"].startswith(f"items[{item}]"),
                                f"{what}: field {err['field']!r} should start with items[{item}]")
        return err

    def reject(self, body, status, code, item=None, what="", raw=False, **kw):
        """POST /v1/score with ``body``; the request must fail and write no row. ``raw``: send
        with http.client and read an early answer (for bodies the server may stop reading)."""
        before = self.daemon.count()
        if raw:
            resp = self.daemon.raw("POST", "/v1/score", body,
                                   headers={"Content-Type": "application/json"})
        else:
            resp = self.daemon.score(body, **kw)
        err = self.assertError(resp, status, code, item, what or repr(body)[:200])
        self.assertEqual(self.daemon.count(), before,
                         f"{what or repr(body)[:200]}: a rejected request wrote audit rows")
        return err


class ErrorTest(ErrorChecks, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        H.require_models("toxicity", "tiny_binary", "tiny_multi")
        cls.daemon = H.start_daemon(cls, models=["toxicity", "tiny_binary", "tiny_multi"])
        cls.D = H.load_config("toxicity")["dims"]["D"]
        cls.Z = H.random_embeddings(8, cls.D, seed=100)

    def good_items(self, n=3):
        return H.b64_items(self.Z[:n], "ok")

    def tearDown(self):
        # the daemon must still be healthy and scoring after every error case
        r = self.daemon.score({"items": self.good_items(1)})
        self.assertEqual(r.status, 200, f"daemon no longer scores after the test: {r}\n"
                                        f"{self.daemon.logs()}")

    # ------------------------------------------------------------------ 400 invalid_json
    def test_invalid_json(self):
        for raw in (b'{"items": [', b"not json", b"", b'{"items": [1,]}',
                    b'{"items": []} trailing', b"\xff\xfe{}", b"{'items': []}",
                    b'{"items": [{"id": "a", "embedding": [1.0, 2.0}]}'):
            with self.subTest(body=raw):
                self.reject(raw, BAD_REQUEST, "invalid_json", what=repr(raw))

    def test_deeply_nested_json(self):
        """A pathological but well-formed body is refused cleanly (and the daemon survives)."""
        raw = b'{"items": ' + b"[" * 100000 + b"]" * 100000 + b"}"
        self.reject(raw, BAD_REQUEST, {"invalid_json", "invalid_request"}, what="deep nesting")

    def test_nul_in_id(self):
        """An id holding U+0000 is either refused with 400 or stored verbatim (not truncated)."""
        item = {"id": "a\u0000b", "embedding_b64": H.embedding_b64(self.Z[0])}
        before = self.daemon.count()
        r = self.daemon.score({"items": [item]})
        if r.status == 200:
            self.assertEqual(r.json["results"][0]["id"], "a\u0000b")
            row = self.daemon.rows_for([r.json["results"][0]["decision_id"]])
            (only,) = row.values()
            self.assertEqual(only["item_id"], "a\u0000b", "id truncated at NUL in the audit DB")
        else:
            self.assertError(r, BAD_REQUEST, {"invalid_json", "invalid_request", "missing_id"},
                             what="NUL in id")
            self.assertEqual(self.daemon.count(), before)

    def test_nan_literal_is_rejected(self):
        emb = ",".join(["0.5"] * (self.D - 1) + ["NaN"])
        raw = ('{"items": [{"id": "a", "embedding": [%s]}]}' % emb).encode()
        self.reject(raw, BAD_REQUEST, {"invalid_json", "non_finite_value"}, what="NaN literal")

    # ------------------------------------------------------------------ 400 invalid_request
    def test_invalid_request_top_level(self):
        items = self.good_items(2)
        cases = [
            ("missing items", {}),
            ("top-level array", [{"items": items}]),
            ("top-level string", "x"),
            ("top-level null", None),
            ("items is an object", {"items": {"0": items[0]}}),
            ("items is a string", {"items": "x"}),
            ("items is null", {"items": None}),
            ("unknown top-level field", {"items": items, "modle": "toxicity"}),
            ("unknown top-level field 2", {"items": items, "extra": 1}),
            ("model is a number", {"model": 5, "items": items}),
            ("model is null", {"model": None, "items": items}),
            ("return_vector is a string", {"items": items, "return_vector": "false"}),
            ("return_vector is a number", {"items": items, "return_vector": 0}),
        ]
        for what, body in cases:
            with self.subTest(case=what):
                data = json.dumps(body).encode()
                self.reject(data, BAD_REQUEST, "invalid_request", what=what)

    def test_invalid_request_item_types(self):
        """Wrong types inside item 1 (item 0 is good): invalid_request, naming item 1 when an
        index is given."""
        good = self.good_items(1)[0]
        emb = H.embedding_json(self.Z[1])
        cases = [
            ("item is a number", 5),
            ("item is a string", "x"),
            ("item is an array", [good]),
            ("no embedding at all", {"id": "b"}),
            ("embedding is a string", {"id": "b", "embedding": "0.1,0.2"}),
            ("embedding is an object", {"id": "b", "embedding": {"0": 0.1}}),
            ("embedding holds a string", {"id": "b", "embedding": emb[:-1] + ["0.5"]}),
            ("embedding holds null", {"id": "b", "embedding": [None] + emb[1:]}),
            ("embedding holds a bool", {"id": "b", "embedding": [True] + emb[1:]}),
            ("embedding holds an array", {"id": "b", "embedding": [[0.1]] + emb[1:]}),
            ("embedding_b64 is a number", {"id": "b", "embedding_b64": 12}),
            ("embedding_b64 is an array", {"id": "b", "embedding_b64": ["AAAA"]}),
        ]
        for what, item in cases:
            with self.subTest(case=what):
                err = self.reject({"items": [good, item]}, BAD_REQUEST, "invalid_request",
                                  what=what)
                if "item" in err:
                    self.assertEqual(err["item"], 1, f"{what}: wrong item index {err}")

    # ------------------------------------------------------------------ 400 missing_id
    def test_missing_id(self):
        items = self.good_items(4)
        del items[2]["id"]
        self.reject({"items": items}, BAD_REQUEST, "missing_id", item=2, what="no id")

    def test_bad_ids(self):
        cases = [
            ("null id", None, {"missing_id", "invalid_request"}),
            ("empty id", "", {"missing_id", "invalid_request"}),
            ("numeric id", 17, {"missing_id", "invalid_request"}),
            ("257-byte id", "a" * 257, {"invalid_request"}),
            ("258-byte id of 129 two-byte chars", "é" * 129, {"invalid_request"}),
        ]
        for what, id_, codes in cases:
            with self.subTest(case=what):
                items = self.good_items(3)
                items[1]["id"] = id_
                self.reject({"items": items}, BAD_REQUEST, codes, item=1, what=what)

    # ------------------------------------------------------------------ 400 dimension_mismatch
    def test_dimension_mismatch_json(self):
        z = H.embedding_json(self.Z[3])
        for what, emb in (("D-1", z[:-1]), ("D+1", z + [0.5]), ("empty", []), ("one", [0.5])):
            with self.subTest(case=what):
                items = self.good_items(5)
                items[3] = {"id": "bad", "embedding": emb}
                self.reject({"items": items}, BAD_REQUEST, "dimension_mismatch", item=3,
                            what=f"JSON embedding {what}")

    def test_dimension_mismatch_base64(self):
        z = self.Z[3]
        for what, arr in (("D-1", z[:-1]), ("D+1", np.append(z, np.float32(0.5))),
                          ("one", z[:1])):
            with self.subTest(case=what):
                items = self.good_items(5)
                items[3] = {"id": "bad", "embedding_b64": H.embedding_b64(arr)}
                self.reject({"items": items}, BAD_REQUEST, "dimension_mismatch", item=3,
                            what=f"base64 embedding {what}")
        # a byte length that is not a multiple of 4
        raw = H.f32(z).astype("<f4").tobytes() + b"\x00\x00"
        items = self.good_items(5)
        items[3] = {"id": "bad", "embedding_b64": base64.b64encode(raw).decode()}
        self.reject({"items": items}, BAD_REQUEST, {"dimension_mismatch", "invalid_base64"},
                    item=3, what="4D+2 bytes")
        items[3] = {"id": "bad", "embedding_b64": ""}
        self.reject({"items": items}, BAD_REQUEST, {"dimension_mismatch", "invalid_base64"},
                    item=3, what="empty base64")

    def test_dimension_mismatch_other_model(self):
        # a valid toxicity (D=1024) embedding sent to the D=32 model
        self.reject({"model": "tiny_binary", "items": self.good_items(1)}, BAD_REQUEST,
                    "dimension_mismatch", item=0, what="1024-d input to a 32-d model")

    # ------------------------------------------------------------------ 400 non_finite_value
    def test_non_finite_base64(self):
        for what, val in (("NaN", np.nan), ("+Inf", np.inf), ("-Inf", -np.inf)):
            with self.subTest(value=what):
                z = self.Z[2].copy()
                z[5] = val
                items = self.good_items(4)
                items[2] = {"id": "nf", "embedding_b64": H.embedding_b64(z)}
                self.reject({"items": items}, BAD_REQUEST, "non_finite_value", item=2,
                            what=f"base64 {what}")
        # a signalling-NaN bit pattern and a negative-NaN bit pattern
        for bits in (0x7F800001, 0xFFC00000):
            raw = bytearray(H.f32(self.Z[2]).astype("<f4").tobytes())
            raw[40:44] = bits.to_bytes(4, "little")
            items = self.good_items(4)
            items[2] = {"id": "nf", "embedding_b64": base64.b64encode(bytes(raw)).decode()}
            self.reject({"items": items}, BAD_REQUEST, "non_finite_value", item=2,
                        what=f"base64 NaN bits {bits:#x}")

    def test_non_finite_json_float32_overflow(self):
        """1e39 is a finite double but overflows float32 to infinity: not a usable value."""
        for val in ("1e39", "-3.5e38"):
            with self.subTest(value=val):
                emb = [repr(v) for v in H.embedding_json(self.Z[1])]
                emb[7] = val
                good = json.dumps(self.good_items(1)[0])
                raw = ('{"items": [%s, {"id": "big", "embedding": [%s]}]}'
                       % (good, ",".join(emb))).encode()
                self.reject(raw, BAD_REQUEST, "non_finite_value", item=1, what=f"JSON {val}")

    def test_non_finite_json_double_overflow(self):
        emb = [repr(v) for v in H.embedding_json(self.Z[1])]
        emb[7] = "1e400"
        raw = ('{"items": [{"id": "big", "embedding": [%s]}]}' % ",".join(emb)).encode()
        self.reject(raw, BAD_REQUEST, {"non_finite_value", "invalid_json"}, what="JSON 1e400")

    # ------------------------------------------------------------------ 400 invalid_base64
    def test_invalid_base64(self):
        good = H.embedding_b64(self.Z[4])
        self.assertTrue(good.endswith("=="))  # 4096 bytes -> two padding characters
        cases = [
            ("punctuation", "!!!!" + good[4:]),
            ("url-safe alphabet", "-_" + good[2:]),
            ("missing padding", good.rstrip("=")),
            ("padding in the middle", good[:8] + "=" + good[9:]),
            ("truncated quad", good[:-5] + "==="),
            ("space inside", good[:100] + " " + good[101:]),
            ("non-ASCII", "é" + good[1:]),
        ]
        for what, text in cases:
            with self.subTest(case=what):
                items = self.good_items(5)
                items[4] = {"id": "b64", "embedding_b64": text}
                self.reject({"items": items}, BAD_REQUEST, "invalid_base64", item=4, what=what)

    # ------------------------------------------------------------------ 400 empty_batch
    def test_empty_batch(self):
        self.reject({"items": []}, BAD_REQUEST, "empty_batch", what="items []")
        self.reject({"model": "tiny_multi", "items": [], "return_vector": False}, BAD_REQUEST,
                    "empty_batch", what="items [] with model")

    # ------------------------------------------------------------------ only the last item bad
    def test_only_last_item_bad(self):
        n = 8
        z_bad = self.Z[0].copy()
        z_bad[-1] = np.inf
        cases = [
            ("dimension_mismatch", {"id": "last", "embedding": H.embedding_json(self.Z[0])[:-3]}),
            ("non_finite_value", {"id": "last", "embedding_b64": H.embedding_b64(z_bad)}),
            ("invalid_base64", {"id": "last", "embedding_b64": "%%%%"}),
            ("missing_id", {"embedding_b64": H.embedding_b64(self.Z[0])}),
        ]
        for code, bad in cases:
            with self.subTest(code=code):
                items = H.b64_items(self.Z[: n - 1], "good") + [bad]
                self.reject({"items": items}, BAD_REQUEST, code, item=n - 1,
                            what=f"last item: {code}")

    # ------------------------------------------------------------------ 404
    def test_model_not_found(self):
        for name in ("nope", "Toxicity", "toxicity2"):
            with self.subTest(model=name):
                self.reject({"model": name, "items": self.good_items(2)}, 404, "model_not_found",
                            what=f"model {name!r}")
        for name in ("../toxicity", "toxicity/1", ""):
            with self.subTest(model=name):
                before = self.daemon.count()
                r = self.daemon.score({"model": name, "items": self.good_items(1)})
                self.assertIn(r.status, (400, 404), r)
                self.assertError(r, r.status, "model_not_found" if r.status == 404
                                 else "invalid_request", what=f"model {name!r}")
                self.assertEqual(self.daemon.count(), before)

    def test_unknown_route(self):
        for method, path in (("GET", "/"), ("GET", "/nope"), ("GET", "/v1"),
                             ("GET", "/v1/score/extra"), ("POST", "/v1/scores"),
                             ("GET", "/v1/models/toxicity/extra"), ("DELETE", "/x/y/z"),
                             ("GET", "/HEALTHZ")):
            with self.subTest(route=f"{method} {path}"):
                before = self.daemon.count()
                body = {"items": self.good_items(1)} if method == "POST" else None
                r = self.daemon.request(method, path, body)
                self.assertError(r, 404, "not_found", what=f"{method} {path}")
                self.assertEqual(self.daemon.count(), before)

    # ------------------------------------------------------------------ 405
    def test_method_not_allowed(self):
        cases = [
            ("GET", "/v1/score", "POST"), ("PUT", "/v1/score", "POST"),
            ("DELETE", "/v1/score", "POST"), ("PATCH", "/v1/score", "POST"),
            ("POST", "/healthz", "GET"), ("POST", "/readyz", "GET"),
            ("POST", "/v1/models", "GET"), ("DELETE", "/v1/models", "GET"),
            ("PUT", "/healthz", "GET"),
        ]
        for method, path, allowed in cases:
            with self.subTest(route=f"{method} {path}"):
                before = self.daemon.count()
                body = {"items": self.good_items(1)} if method in ("PUT", "PATCH", "POST") \
                    else None
                r = self.daemon.request(method, path, body)
                self.assertError(r, 405, "method_not_allowed", what=f"{method} {path}")
                allow = r.headers.get("Allow")
                self.assertIsNotNone(allow, f"{method} {path}: 405 without an Allow header")
                methods = {m.strip().upper() for m in allow.split(",") if m.strip()}
                self.assertIn(allowed, methods, f"{method} {path}: Allow: {allow}")
                self.assertNotIn(method, methods, f"{method} {path}: Allow: {allow}")
                self.assertEqual(self.daemon.count(), before)

    # ------------------------------------------------------------------ 415
    def test_unsupported_media_type(self):
        body = json.dumps({"items": self.good_items(2)}).encode()
        for ct in ("text/plain", "application/x-www-form-urlencoded", "application/xml",
                   "multipart/form-data; boundary=x", "application/jsonx", "text/json",
                   "application/octet-streams"):
            with self.subTest(content_type=ct):
                self.reject(body, 415, "unsupported_media_type", content_type=ct, what=ct)

    def test_missing_content_type(self):
        body = json.dumps({"items": self.good_items(2)}).encode()
        before = self.daemon.count()
        r = self.daemon.raw("POST", "/v1/score", body)  # http.client: no Content-Type at all
        self.assertError(r, 415, "unsupported_media_type", what="no Content-Type")
        self.assertEqual(self.daemon.count(), before)


class LimitsTest(ErrorChecks, unittest.TestCase):
    """413 with --max-batch 8 --max-body-bytes 100000."""

    MAX_BODY = 100000
    MAX_BATCH = 8

    @classmethod
    def setUpClass(cls):
        H.require_models("toxicity", "tiny_binary")
        cls.daemon = H.start_daemon(
            cls, models=["toxicity", "tiny_binary"],
            args=["--max-batch", str(cls.MAX_BATCH), "--max-body-bytes", str(cls.MAX_BODY)])
        cls.D = H.load_config("toxicity")["dims"]["D"]

    def tiny(self, n, seed=0):
        return H.random_embeddings(n, 32, seed=seed)

    def padded(self, body, size):
        text = json.dumps(body).encode()
        self.assertLessEqual(len(text), size)
        return text + b" " * (size - len(text))

    def test_batch_at_limit_accepted(self):
        before = self.daemon.count()
        r = self.daemon.score({"model": "tiny_binary", "items": H.json_items(self.tiny(8))})
        self.assertEqual(r.status, 200, r)
        self.assertEqual(len(r.json["results"]), 8)
        self.assertEqual(self.daemon.count(), before + 8)

    def test_batch_too_large(self):
        for n in (9, 50):
            with self.subTest(items=n):
                self.reject({"model": "tiny_binary", "items": H.json_items(self.tiny(n))}, 413,
                            "batch_too_large", what=f"{n} items")

    def test_body_at_limit_accepted(self):
        Z = H.random_embeddings(8, self.D, seed=7)
        body = self.padded({"items": H.b64_items(Z)}, self.MAX_BODY)
        self.assertEqual(len(body), self.MAX_BODY)
        before = self.daemon.count()
        r = self.daemon.score(body)
        self.assertEqual(r.status, 200, f"a body of exactly --max-body-bytes is allowed: {r}")
        self.assertEqual(self.daemon.count(), before + 8)

    def test_body_one_over_limit(self):
        Z = H.random_embeddings(8, self.D, seed=7)
        body = self.padded({"items": H.b64_items(Z)}, self.MAX_BODY + 1)
        self.reject(body, 413, "payload_too_large", what="max-body-bytes + 1")

    def test_payload_too_large(self):
        Z = H.random_embeddings(8, self.D, seed=8)
        body = json.dumps({"items": H.json_items(Z)}).encode()  # ~165 kB of JSON numbers
        self.assertGreater(len(body), self.MAX_BODY)
        self.reject(body, 413, "payload_too_large", what=f"{len(body)} bytes")
        big = json.dumps({"items": H.json_items(H.random_embeddings(8, self.D, 9) * 1e3)})
        big = big.encode() + b" " * (2_000_000 - len(big))
        # the daemon may answer 413 as soon as it sees Content-Length and stop reading, which
        # urllib cannot cope with (EPIPE while sending): read the early answer with http.client
        self.reject(big, 413, "payload_too_large", what="2 MB", raw=True)

    def test_payload_too_large_headers_only(self):
        """413 comes from Content-Length alone, before any body byte is sent."""
        import socket
        before = self.daemon.count()
        with socket.create_connection(("127.0.0.1", self.daemon.port), timeout=60) as s:
            auth = self.daemon.auth_headers("/v1/score").get("Authorization", "")
            s.sendall(b"POST /v1/score HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                      b"Authorization: " + auth.encode() + b"\r\n"
                      b"Content-Type: application/json\r\nContent-Length: 50000000\r\n\r\n")
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
        self.assertTrue(data.startswith(b"HTTP/1.1 413"), data[:200])
        self.assertEqual(self.daemon.count(), before)

    def test_payload_too_large_chunked(self):
        """A chunked body (no Content-Length) is limited too."""
        before = self.daemon.count()
        Z = H.random_embeddings(8, self.D, seed=10)
        body = json.dumps({"items": H.json_items(Z)}).encode()
        chunks = [body[i:i + 16384] for i in range(0, len(body), 16384)]
        r = self.daemon.raw("POST", "/v1/score", headers={"Content-Type": "application/json"},
                            chunks=chunks)
        self.assertError(r, 413, "payload_too_large", what="chunked body")
        self.assertEqual(self.daemon.count(), before)

    def test_limits_do_not_break_the_daemon(self):
        r = self.daemon.get("/readyz")
        self.assertEqual(r.status, 200, r)


class NotReadyTest(ErrorChecks, unittest.TestCase):
    """No model can be loaded (the only one, the default, is broken): /readyz is 503, /v1/models
    reports the failed version, and scoring answers an error without writing anything."""

    @classmethod
    def setUpClass(cls):
        H.require_models("tiny_binary")
        cls.src = tempfile.mkdtemp(prefix="pgcld-broken-")
        cls.addClassCleanup(shutil.rmtree, cls.src, True)
        broken = os.path.join(cls.src, "toxicity")
        shutil.copytree(H.model_source("tiny_binary"), broken)
        with open(os.path.join(broken, "1", "config.json"), "w") as f:
            f.write('{"format": "pgcld-checkpoint", "format_version": 1, "task": ')  # truncated
        cls.daemon = H.start_daemon(cls, models=[], extra_models={"toxicity": broken})

    def test_readyz_503(self):
        r = self.daemon.get("/readyz")
        self.assertEqual(r.status, 503, r)
        self.assertEqual(r.json.get("status"), "not_ready", r)
        self.assertIs(r.json["checks"].get("models"), False, r)
        self.assertIs(r.json["checks"].get("audit_db"), True, r)

    def test_healthz_still_ok(self):
        r = self.daemon.get("/healthz")
        self.assertEqual((r.status, r.json), (200, {"status": "ok"}))

    def test_models_lists_failed_version(self):
        r = self.daemon.get("/v1/models")
        self.assertEqual(r.status, 200, r)
        tox = {m["name"]: m for m in r.json["models"]}["toxicity"]
        self.assertIsNone(tox["active_version"])
        (v,) = tox["versions"]
        self.assertEqual(v["state"], "failed")
        self.assertIsInstance(v.get("error"), str)
        self.assertIn("config.json", v["error"], "the load error should name the file")

    def test_score_without_a_loaded_model(self):
        """The contract does not say which of 503 not_ready and 404 model_not_found a model
        whose every version failed gets; either is accepted, nothing may be written."""
        Z = H.random_embeddings(2, 32, seed=3)
        for body in ({"items": H.b64_items(Z)}, {"model": "toxicity", "items": H.b64_items(Z)}):
            with self.subTest(body=list(body)):
                before = self.daemon.count()
                r = self.daemon.score(body)
                self.assertIn(r.status, (503, 404), r)
                self.assertError(r, r.status, "not_ready" if r.status == 503
                                 else "model_not_found", what="no loaded model")
                self.assertEqual(self.daemon.count(), before)


class AuditUnavailableTest(ErrorChecks, unittest.TestCase):
    """Another process holds the SQLite write lock: scoring answers 503 audit_unavailable and
    writes nothing; once the lock is gone scoring works again."""

    @classmethod
    def setUpClass(cls):
        H.require_models("tiny_binary")
        cls.daemon = H.start_daemon(cls, models=["tiny_binary"], default_model="tiny_binary")

    @H.sqlite_only("write-locks the SQLite file (PostgreSQL going away under load: test_pg_fleet)")
    def test_audit_unavailable(self):
        d = self.daemon
        Z = H.random_embeddings(3, 32, seed=4)
        r = d.score({"items": H.b64_items(Z)})
        self.assertEqual(r.status, 200, r)
        before = d.count()
        lock = sqlite3.connect(d.db_path, timeout=30, isolation_level=None)
        try:
            lock.execute("BEGIN EXCLUSIVE")
            lock.execute("INSERT INTO schema_migrations SELECT * FROM schema_migrations WHERE 0")
            holder = {}

            def call():
                holder["r"] = d.score({"items": H.b64_items(Z)}, timeout=120)

            t = threading.Thread(target=call)
            t.start()
            t.join(130)
            self.assertFalse(t.is_alive(), "scoring hung while the audit DB was locked")
            self.assertError(holder["r"], 503, "audit_unavailable", what="DB write-locked")
        finally:
            lock.execute("ROLLBACK")
            lock.close()
        self.assertEqual(d.count(), before, "a failed audit write left rows behind")
        r = d.score({"items": H.b64_items(Z)})
        self.assertEqual(r.status, 200, f"scoring should recover once the lock is gone: {r}")
        self.assertEqual(d.count(), before + 3)
        self.assertEqual(d.get("/readyz").status, 200)


class CliErrorTest(unittest.TestCase):
    """Bad command lines exit non-zero (and never start serving)."""

    def setUp(self):
        self.cwd = tempfile.mkdtemp(prefix="pgcld-cli-cwd-")
        self.addCleanup(shutil.rmtree, self.cwd, True)

    def run_cli(self, args):
        H.require_binary()
        try:
            # cwd: a scratch directory, so that a command line wrongly accepted cannot leave
            # files (a default audit DB, ...) in the checkout
            p = subprocess.run([H.PGCLD_BIN] + args, capture_output=True, timeout=60,
                               stdin=subprocess.DEVNULL, cwd=self.cwd)
        except subprocess.TimeoutExpired:
            self.fail(f"pgcld {' '.join(args)} did not exit (it should refuse this command line)")
        return p

    def test_help(self):
        p = self.run_cli(["--help"])
        self.assertEqual(p.returncode, 0, p.stderr)

    def test_bad_command_lines(self):
        tmp = tempfile.mkdtemp(prefix="pgcld-cli-")
        self.addCleanup(shutil.rmtree, tmp, True)
        models = os.path.join(tmp, "models")
        os.makedirs(models)
        db = os.path.join(tmp, "a.db")
        base = ["serve", "--listen", "127.0.0.1:0", "--models", models, "--db", db]
        cases = [
            [],
            ["frobnicate"],
            base + ["--no-such-option"],
            ["serve", "--listen", "not-an-address", "--models", models, "--db", db],
            ["serve", "--listen", "127.0.0.1:99999", "--models", models, "--db", db],
            base + ["--max-batch", "zero"],
            base + ["--max-batch", "-1"],
            base + ["--max-body-bytes", "abc"],
            base + ["--synchronous", "SOMETIMES"],
        ]
        for args in cases:
            with self.subTest(args=" ".join(args)):
                p = self.run_cli(args)
                self.assertNotEqual(p.returncode, 0,
                                    f"pgcld {' '.join(args)} should fail\n{p.stderr[-2000:]}")
                self.assertTrue(p.stderr, "a refused command line should say why on stderr")


if __name__ == "__main__":
    unittest.main(verbosity=2)
