#!/usr/bin/python3
"""Writes the seed corpora of tests/fuzz/corpus/<target>/: a few valid and a few invalid inputs per
harness, derived from tests/bad_inputs/ and from small valid requests and checkpoints. The committed
files are the seeds; this script documents how they were made (and regenerates them):

    /usr/bin/python3 tests/fuzz/make_corpus.py

Regression inputs for findings are committed beside them by hand (names starting "regress-").
"""

import base64
import json
import os
import shutil
import struct
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, os.pardir, os.pardir))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
import harness as H  # noqa: E402

D = 32
CORPUS = os.path.join(HERE, "corpus")


def put(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def bad_input(prefix):
    """(expectations, raw request) of the tests/bad_inputs case whose name starts with prefix."""
    d = os.path.join(ROOT, "tests", "bad_inputs")
    for f in sorted(os.listdir(d)):
        if f[4:].startswith(prefix):
            with open(os.path.join(d, f), "rb") as fh:
                first, _, raw = fh.read().partition(b"\n")
            return raw.replace(b"Authorization: Bearer {{SCORER}}\r\n", b"")
    raise KeyError(prefix)


def body_of(raw):
    return raw.partition(b"\r\n\r\n")[2]


rng = np.random.default_rng(7)
Z = (rng.standard_normal((3, D)) / np.sqrt(D)).astype(np.float32)
emb = [[float(v) for v in z] for z in Z]
b64 = [base64.b64encode(z.astype("<f4").tobytes()).decode() for z in Z]

score_valid = [
    {"items": [{"id": "a", "embedding": emb[0]}]},
    {"model": "tiny", "return_vector": False,
     "items": [{"id": "a", "embedding": emb[0]}, {"id": "b\u00e9\\\"", "embedding_b64": b64[1]}]},
    {"items": [{"embedding_b64": b64[2], "id": "c"}], "model": "tiny"},
]


def http(method, path, body=b"", ctype="application/json", extra=()):
    if isinstance(body, str):
        body = body.encode()
    lines = [f"{method} {path} HTTP/1.1", "Host: fuzz"]
    if body or method in ("POST", "PUT"):
        lines += [f"Content-Type: {ctype}", f"Content-Length: {len(body)}"]
    lines += list(extra)
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


# Seeds this script does not make, kept as they are: fuzz_note's carry Ed25519 signatures by the
# harness's test keys, made with tests/core/note_tool (tests/fuzz/fuzz_note.c names the keys).
MADE_ELSEWHERE = {"fuzz_note"}


def main():
    for target in os.listdir(CORPUS) if os.path.isdir(CORPUS) else []:  # keep the regress-* inputs
        if target in MADE_ELSEWHERE:
            continue
        for f in os.listdir(os.path.join(CORPUS, target)):
            if not f.startswith("regress-"):
                os.remove(os.path.join(CORPUS, target, f))

    # ---- fuzz_score: request bodies, numbers, float rows, id lists
    for i, body in enumerate(score_valid):
        put("fuzz_score", f"valid-{i}.json", json.dumps(body))
    for name in ("truncated-object", "f32-overflow-1e39", "denormals-and-negative-zero-then-bad-item",
                 "duplicate-model-escaped", "utf8-overlong", "b64-url-alphabet", "dimension-short",
                 "big-integer-then-bad-item"):
        put("fuzz_score", f"bad-{name}.json", body_of(bad_input(name)))
    for i, num in enumerate(["0.1", "-0", "1e-45", "3.4028235e38", "7.038531e-26", "1.00000005960464477539",
                             "123456789012345678901234567890e-20"]):
        put("fuzz_score", f"number-{i}", num)
    put("fuzz_score", "rows-1", Z[0].astype("<f4").tobytes())
    put("fuzz_score", "ids-2", '["a","b"]')

    # ---- fuzz_v2: flags, Inference-Header-Content-Length (LE16), body
    def v2(name, flags, body, ihcl=0):
        put("fuzz_v2", name, bytes([flags]) + struct.pack("<H", ihcl) + body)

    v2("json-valid", 0, json.dumps({"id": "r1", "inputs": [
        {"name": "embedding", "datatype": "FP32", "shape": [2, D], "data": emb[:2]},
        {"name": "id", "datatype": "BYTES", "shape": [2], "data": ["a", "b"]}]}).encode())
    v2("json-valid-multi", 4, json.dumps({"inputs": [
        {"name": "embedding", "datatype": "FP32", "shape": [1, D], "data": emb[0]}]}).encode())
    header = json.dumps({"inputs": [{"name": "embedding", "datatype": "FP32", "shape": [2, D],
                                     "parameters": {"binary_data_size": 2 * D * 4}}]}).encode()
    v2("binary-valid", 3, header + Z[:2].astype("<f4").tobytes(), len(header))
    for name in ("v2-bin-shape-overflow", "v2-bin-size-past-body", "v2-data-count-mismatch", "v2-invalid-json",
                 "v2-two-embeddings", "v2-two-id-tensors", "v2-bin-two-id-tensors", "v2-id-shape-over-data",
                 "v2-bin-id-data-and-binary"):
        raw = bad_input(name)
        body = body_of(raw)
        ihcl = 0
        flags = 0
        for line in raw.split(b"\r\n"):
            if line.startswith(b"Inference-Header-Content-Length: "):
                try:
                    ihcl = int(line.split(b": ")[1]) & 0xFFFF
                    flags = 3
                except ValueError:
                    pass
        v2(f"bad-{name}", flags, body, ihcl)

    # ---- fuzz_checkpoint: 4-byte config length, config.json, model.safetensors
    for name, cfg, st in tiny_checkpoints():
        put("fuzz_checkpoint", name, struct.pack("<I", len(cfg)) + cfg + st)
    name, cfg, st = tiny_checkpoints()[0]
    put("fuzz_checkpoint", "bad-truncated-weights", struct.pack("<I", len(cfg)) + cfg + st[:-9])
    put("fuzz_checkpoint", "bad-header-length", struct.pack("<I", len(cfg)) + cfg + b"\xff" * 8 + st[8:])

    # ---- fuzz_tiles: a case byte (0 a tile path, 1 a stored tile, 2 a store's reads), then its input
    put("fuzz_tiles", "path-full", b"\x00tile/0/x001/x234/067")
    put("fuzz_tiles", "path-partial-entries", b"\x00tile/entries/273.p/112")
    put("fuzz_tiles", "path-max", b"\x00tile/63/x018/x446/x744/x073/x709/x551/615.p/255")
    put("fuzz_tiles", "prefix-bundle", b"\x01\x01\x02\x00\x02ab\x00\x00\x00\x01c")
    put("fuzz_tiles", "store-append", b"\x02\x00\x00\x01\x2c\x00\x03\x02\x05" + b"\x00\x20" + bytes(32) +
        b"\x00\x04\x00\x02ab")

    # ---- fuzz_daemon: raw connections
    put("fuzz_daemon", "score-json", http("POST", "/v1/score", json.dumps(score_valid[0])))
    put("fuzz_daemon", "score-octets", http("POST", "/v1/score?model=tiny_multi&return_vector=false",
                                            Z[:2].astype("<f4").tobytes(), "application/octet-stream",
                                            extra=['Pgcld-Item-Ids: ["x","y"]']))
    put("fuzz_daemon", "v2-binary", http("POST", "/v2/models/tiny_binary/infer", header + Z[:2].astype("<f4").tobytes(),
                                         "application/octet-stream",
                                         extra=[f"Inference-Header-Content-Length: {len(header)}"]))
    put("fuzz_daemon", "pipelined", http("GET", "/healthz") + http("GET", "/v1/models") +
        http("GET", "/v2/models/tiny_multi") + http("GET", "/metrics"))
    put("fuzz_daemon", "decisions", http("GET", "/v1/decisions?limit=2&model=tiny_binary"))
    put("fuzz_daemon", "chunked", http("POST", "/v1/score", b"", extra=["Transfer-Encoding: chunked"])
        .replace(b"Content-Length: 0\r\n", b"") + b"5\r\n{\"ite\r\n0\r\n\r\n")
    # issue 27: header values with optional whitespace around them (one reader trims SP and HTAB)
    put("fuzz_daemon", "headers-with-ows", http("POST", "/v1/score", json.dumps(score_valid[0]), extra=[
        "Idempotency-Key: k \t", "X-Request-Id: \tabc  ",
        "traceparent: 00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01 "]))
    put("fuzz_daemon", "consistency-huge", http("GET", "/v1/audit/consistency?first=1&second=18446744073709551616"))
    # every route once, so that mutations start from each handler (--auth off: any route is open)
    uid = "01a1fe43-927f-7000-870b-c9acd757c9eb"
    routes = [
        ("GET", "/v1/models", b""), ("GET", "/v2", b""), ("GET", "/v2/health/ready", b""),
        ("GET", "/v2/models/tiny_binary/ready", b""), ("GET", "/readyz", b""),
        ("POST", "/v1/admin/models/tiny_multi/activate", b'{"version":"1"}'),
        ("POST", "/v1/admin/models/tiny_binary/shadow", b'{"version":"1"}'),
        ("GET", "/v1/admin/models/tiny_binary/shadow", b""),
        ("DELETE", "/v1/admin/models/tiny_binary/shadow", b""),
        ("POST", "/v1/admin/keys", b'{"role":"scorer","name":"fuzz"}'), ("GET", "/v1/admin/keys", b""),
        ("DELETE", "/v1/admin/keys/k1", b""),
        ("GET", f"/v1/decisions/{uid}", b""), ("GET", f"/v1/decisions/{uid}/statement", b""),
        ("POST", f"/v1/decisions/{uid}/contests", b'{"reason":"wrong"}'),
        ("POST", f"/v1/decisions/{uid}/rescore", b""), ("GET", "/v1/contests?status=open", b""),
        ("POST", f"/v1/contests/{uid}/resolution", b'{"outcome":"upheld","note":"ok"}'),
        ("GET", "/v1/audit/export?format=csv&since=2026-01-01T00:00:00Z", b""), ("GET", "/v1/audit/stats", b""),
        ("GET", "/v1/audit/verify", b""), ("POST", "/v1/audit/checkpoints", b""), ("GET", "/console/", b""),
        # issue 28: the transparency log's routes (the writer id is the host's: "w" exercises the paths)
        ("GET", "/log/", b""), ("GET", "/log/w/checkpoint", b""), ("GET", "/log/w/tile/0/000.p/3", b""),
        ("GET", "/log/w/tile/entries/x001/234", b""), ("GET", "/log/w/consistency?first=1&second=3", b""),
        ("POST", "/log/checkpoint", b""), ("GET", f"/v1/decisions/{uid}/proof?format=tlog", b""),
        ("GET", f"/v1/contests/{uid}/proof", b""), ("GET", f"/v1/contests/{uid}/resolution/proof", b""),
    ]
    for i, (method, path, body) in enumerate(routes):
        put("fuzz_daemon", "route-%02d" % i, http(method, path, body))
    for name in ("content-length-smaller-than-body", "content-length-twice-differing", "b64-nan-bits",
                 "octets-ids-empty-string", "v2-bin-header-length-too-small", "deep-nesting-objects"):
        put("fuzz_daemon", f"bad-{name}", bad_input(name))
    # issue 13: one case of each class of the request's head (server/http/request_head.c), and the
    # requests libmicrohttpd answers itself
    for name in ("te-gzip-then-chunked", "te-in-http10", "header-name-space-before-colon",
                 "authorization-nul-then-junk", "header-nul-in-last-line", "header-control-character",
                 "header-obs-fold", "target-raw-nul", "method-raw-nul", "path-percent-nul-score",
                 "query-percent-nul-model", "two-content-type-headers", "two-host-headers",
                 "two-content-length-headers", "http11-without-host", "json-charset-latin1",
                 "content-encoding-gzip", "query-filter-without-value", "json-with-model-query",
                 "v2-data-ragged-rows", "v2-data-deeper-than-shape", "library-content-length-plus",
                 "library-content-length-list", "library-content-length-overflow", "library-chunk-size-overflow",
                 "library-chunk-size-malformed", "library-http-version-2", "library-header-line-without-colon"):
        put("fuzz_daemon", f"bad-{name}", bad_input(name))
    print("corpus written to", CORPUS)


def safetensors(tensors):
    header, blobs, off = {}, [], 0
    for name, (dtype, arr) in tensors.items():
        raw = np.asarray(arr, dtype={"F32": "<f4", "F16": "<f2"}[dtype]).tobytes()
        header[name] = {"dtype": dtype, "shape": list(np.shape(arr)), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(blobs)


def tiny_checkpoints():
    """Three small valid checkpoints (D=4): binary with a golden vector; multiclass with BatchNorm,
    F16 weights and a label_map policy; ordinal with two layers."""
    out = []
    r = np.random.default_rng(11)

    def w(*shape):
        return (r.standard_normal(shape) * 0.5).astype(np.float32)

    for kind in ("binary", "multiclass", "ordinal"):
        Din, d = 4, 2
        K = 2 if kind == "binary" else 3
        H_ = 1 if kind == "binary" else K
        layers = [{"linear": "mlp.0", "in": Din, "out": d, "activation": "leaky_relu"}]
        t = {"mlp.0.weight": ("F32", w(d, Din)), "mlp.0.bias": ("F32", w(d))}
        if kind == "ordinal":
            layers = [{"linear": "mlp.0", "in": Din, "out": 3, "activation": "relu"},
                      {"linear": "mlp.1", "in": 3, "out": d}]
            t = {"mlp.0.weight": ("F32", w(3, Din)), "mlp.0.bias": ("F32", w(3)),
                 "mlp.1.weight": ("F32", w(d, 3)), "mlp.1.bias": ("F32", w(d))}
        dt = "F16" if kind == "multiclass" else "F32"
        if kind == "multiclass":
            layers[0]["batchnorm"] = "bn.0"
            t.update({"bn.0.weight": (dt, w(d)), "bn.0.bias": (dt, w(d)), "bn.0.running_mean": (dt, w(d)),
                      "bn.0.running_var": (dt, np.abs(w(d)) + 0.5), "bn.0.num_batches_tracked": ("F32", [3.0])})
        t.update({"q.weight": (dt, w(d, Din)), "q.bias": (dt, w(d)), "k.weight": (dt, w(d, d)), "k.bias": (dt, w(d)),
                  "v.weight": (dt, w(d, d)), "v.bias": (dt, w(d)), "protos": (dt, w(K, d)),
                  "alpha": ("F32", np.float32(0.5)), "head.weight": (dt, w(H_, d)), "head.bias": (dt, w(H_))})
        labels = ["no", "yes"] if kind == "binary" else ["a", "b", "c"]
        policy = ({"kind": "threshold", "label": labels[-1], "t_review": 0.3, "t_block": 0.8} if kind != "multiclass" else
                  {"kind": "label_map", "actions": {"a": "allow", "b": "review", "c": "block"}, "min_confidence": 0.4})
        cfg = {"format": "pgcld-checkpoint", "format_version": 1, "task": kind, "dims": {"D": Din, "d": d, "K": K},
               "labels": labels, "semantic_mlp": {"batchnorm_eps": 1e-5, "layers": layers},
               "attention": {"query": "q", "key": "k", "value": "v", "prototypes": "protos", "alpha": "alpha"},
               "head": {"linear": "head"}, "decision_policy": policy}
        st = safetensors(t)
        if kind == "binary":  # a golden vector, recomputed by the reference implementation
            tmp = tempfile.mkdtemp()
            try:
                with open(os.path.join(tmp, "config.json"), "w") as f:
                    json.dump(cfg, f)
                with open(os.path.join(tmp, "model.safetensors"), "wb") as f:
                    f.write(st)
                z = np.array([0.5, -0.25, 0.125, 1.0], dtype=np.float32)
                e, probs = H.ReferenceModel(tmp).forward(z)
            finally:
                shutil.rmtree(tmp)
            cfg["golden"] = [{"embedding_b64": base64.b64encode(z.tobytes()).decode(),
                              "vector": [float(v) for v in e[0]], "probabilities": [float(p) for p in probs[0]]}]
        out.append((f"valid-{kind}", json.dumps(cfg).encode(), st))
    return out


if __name__ == "__main__":
    main()
