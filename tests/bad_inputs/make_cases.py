#!/usr/bin/python3
"""Writes the bad-input cases of tests/bad_inputs/ (one NNN-name.http file per case).

Each file is one line of expectations, then the raw request bytes exactly as they go on the wire:

    #! {"status": 400, "code": "invalid_json", "item": 0, "field": "items[0].embedding"}
    POST /v1/score HTTP/1.1\r\n ... \r\n\r\n<body>

status null: the daemon must send no answer (it waits for a body that never comes) before it closes
the idle connection (the runner gives it --connection-timeout 5 and reads until the close). code null: the answer comes from libmicrohttpd itself (not a
pgcld JSON error). "{{SCORER}}", "{{REVIEWER}}", "{{ADMIN}}" in the header part are replaced by
the runner with an API key of that role. The daemon runs with the tiny test models (D = 32,
default model tiny_binary), --max-batch 8 and --max-body-bytes 16384
(tests/integration/test_bad_inputs.py).

The committed .http files are the test; this script only documents how they were made. Run it
from anywhere: /usr/bin/python3 tests/bad_inputs/make_cases.py
"""

import base64
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
D = 32

CASES = []


def emb(n=D, v="0.125"):
    return "[" + ",".join([v] * n) + "]"


def b64(values):
    return base64.b64encode(struct.pack("<%df" % len(values), *values)).decode()


def b64_bits(bits):
    return base64.b64encode(struct.pack("<%dI" % len(bits), *bits)).decode()


GOOD = [0.125] * D
GOOD_ITEM = '{"id":"ok","embedding":%s}' % emb()


def request(method="POST", path="/v1/score", body=b"", ctype="application/json", auth="SCORER",
            length="auto", extra=()):
    if isinstance(body, str):
        body = body.encode("utf-8")
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1"]
    if auth:
        lines.append(auth if ":" in auth else f"Authorization: Bearer {{{{{auth}}}}}")
    if ctype is not None:
        lines.append(f"Content-Type: {ctype}")
    lines.extend(extra)
    if length == "auto":
        if body or method in ("POST", "PUT"):
            lines.append(f"Content-Length: {len(body)}")
    elif length is not None:
        lines.append(f"Content-Length: {length}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def case(name, status, code, raw, item=None, field=None, note=None, max_seconds=None, max_rss_growth_mib=None):
    """max_rss_growth_mib: the daemon's peak resident memory during the case may rise at most this far
    above its size before it (what a resource bound is checked by: not by time). max_seconds, a
    wall-clock bound of earlier cases, is still written when given, and not checked by the runner."""
    exp = {"status": status, "code": code}
    if max_seconds is not None:
        exp["max_seconds"] = max_seconds
    if max_rss_growth_mib is not None:
        exp["max_rss_growth_mib"] = max_rss_growth_mib
    if item is not None:
        exp["item"] = item
    if field is not None:
        exp["field"] = field
    if note:
        exp["note"] = note
    CASES.append((name, exp, raw))


def score(name, body, status, code, item=None, field=None, note=None, **kw):
    case(name, status, code, request(body=body, **kw), item, field, note)


def v2(name, body, status, code, item=None, field=None, note=None, model="tiny_binary", **kw):
    case(name, status, code, request(path=f"/v2/models/{model}/infer", body=body, **kw), item, field, note)


def v2_json(shape, data, dtype="FP32", name="embedding", extra=""):
    return ('{"inputs":[{"name":"%s","datatype":"%s","shape":%s,"data":%s}]%s}' %
            (name, dtype, json.dumps(shape), data, extra))


def v2_binary(header, binary, ihcl=None):
    h = json.dumps(header).encode()
    return h + binary, (len(h) if ihcl is None else ihcl)


def v2_bin_case(name, header, binary, status, code, ihcl=None, field=None, note=None):
    body, hl = v2_binary(header, binary, ihcl)
    v2(name, body, status, code, field=field, note=note, ctype="application/octet-stream",
       extra=(f"Inference-Header-Content-Length: {hl}",))


def emb_tensor(n, size=None):
    return {"name": "embedding", "datatype": "FP32", "shape": [n, D],
            "parameters": {"binary_data_size": n * D * 4 if size is None else size}}


# ---- /v1/score: malformed JSON
score("empty-body", "", 400, "invalid_json")
score("truncated-object", '{"items":[{"id":"a","embedding":[0.1,0.2', 400, "invalid_json")
score("truncated-in-string", '{"items":[{"id":"a', 400, "invalid_json")
score("truncated-after-comma", '{"items":[%s,' % GOOD_ITEM, 400, "invalid_json")
score("truncated-number-exponent", '{"items":[{"id":"a","embedding":[1e', 400, "invalid_json")
score("deep-nesting-arrays", '{"items":' + "[" * 3000 + "]" * 3000 + "}", 400, "invalid_json",
      note="deeper than the JSON parser's depth limit")
score("deep-nesting-objects", '{"a":' * 2500 + "1" + "}" * 2500, 400, "invalid_json")
score("deep-nesting-unclosed", '{"items":' + "[" * 6000, 400, "invalid_json")
score("nested-array-in-embedding", '{"items":[{"id":"a","embedding":%s}]}' % ("[" * 50 + "1" + "]" * 50),
      400, "dimension_mismatch", item=0, field="items[0].embedding")
score("trailing-garbage", '{"items":[%s]} x' % GOOD_ITEM, 400, "invalid_json")
score("two-documents", '{"items":[%s]}{"items":[]}' % GOOD_ITEM, 400, "invalid_json")
score("byte-order-mark", b"\xef\xbb\xbf" + ('{"items":[%s]}' % GOOD_ITEM).encode(), 400, "invalid_json")
score("trailing-comma", '{"items":[%s,]}' % GOOD_ITEM, 400, "invalid_json")
score("single-quotes", "{'items':[]}", 400, "invalid_json")
score("comment", '{"items":[%s] /* hi */}' % GOOD_ITEM, 400, "invalid_json")
score("leading-zero-number", '{"items":[{"id":"a","embedding":[01%s]}]}' % (",0" * (D - 1)), 400, "invalid_json")
score("hex-number", '{"items":[{"id":"a","embedding":[0x1%s]}]}' % (",0" * (D - 1)), 400, "invalid_json")
score("lone-minus", '{"items":[{"id":"a","embedding":[-%s]}]}' % (",0" * (D - 1)), 400, "invalid_json")
score("bare-dot", '{"items":[{"id":"a","embedding":[.5%s]}]}' % (",0" * (D - 1)), 400, "invalid_json")

# ---- numbers
score("f32-overflow-1e39", '{"items":[{"id":"a","embedding":[1e39%s]}]}' % (",0" * (D - 1)),
      400, "non_finite_value", item=0, field="items[0].embedding")
score("f32-overflow-negative", '{"items":[%s,{"id":"b","embedding":[0%s,-3.5e38]}]}' % (GOOD_ITEM, ",0" * (D - 2)),
      400, "non_finite_value", item=1, field="items[1].embedding")
score("f64-overflow-1e400", '{"items":[{"id":"a","embedding":[1e400%s]}]}' % (",0" * (D - 1)),
      400, "invalid_json", note="beyond double range: jansson refuses the document (test_errors accepts either)")
score("denormals-and-negative-zero-then-bad-item",
      '{"items":[{"id":"a","embedding":[1e-45,-0,-0.0,1.4e-45,1e-50,-1e-320,0e0,-0e-5%s]},{"embedding":%s}]}'
      % (",0" * (D - 8), emb()), 400, "missing_id", item=1, field="items[1].id",
      note="denormals, underflow to zero and -0 are valid values: the error is item 1's")
score("huge-exponent", '{"items":[{"id":"a","embedding":[1e999999999999%s]}]}' % (",0" * (D - 1)),
      400, "invalid_json")
score("long-mantissa-overflow", '{"items":[{"id":"a","embedding":[%s%s]}]}' % ("9" * 40, ",0" * (D - 1)),
      400, "non_finite_value", item=0, field="items[0].embedding",
      note="a 40-digit integer: valid JSON, not finite as a float32 (jansson alone calls it a too big integer)")
score("big-integer-then-bad-item", '{"items":[{"id":"a","embedding":[123456789012345678901234567890%s]},{"id":"b"}]}'
      % (",0" * (D - 1)), 400, "invalid_request", item=1, field="items[1]",
      note="a 30-digit integer is a valid (finite) value: the error is item 1's")
score("nan-literal", '{"items":[{"id":"a","embedding":[NaN%s]}]}' % (",0" * (D - 1)), 400, "invalid_json")
score("infinity-literal", '{"items":[{"id":"a","embedding":[Infinity%s]}]}' % (",0" * (D - 1)), 400, "invalid_json")
score("negative-infinity-literal", '{"items":[{"id":"a","embedding":[-Infinity%s]}]}' % (",0" * (D - 1)),
      400, "invalid_json")
score("nan-as-string", '{"items":[{"id":"a","embedding":["NaN"%s]}]}' % (",0" * (D - 1)),
      400, "invalid_request", item=0, field="items[0].embedding")

# ---- wrong types
score("body-is-array", "[]", 400, "invalid_request")
score("body-is-number", "42", 400, "invalid_request")
score("body-is-string", '"items"', 400, "invalid_request")
score("body-is-null", "null", 400, "invalid_request")
score("items-missing", '{"model":"tiny_binary"}', 400, "invalid_request", field="items")
score("items-is-object", '{"items":{"id":"a"}}', 400, "invalid_request", field="items")
score("items-is-null", '{"items":null}', 400, "invalid_request", field="items")
score("item-is-string", '{"items":[%s,"b"]}' % GOOD_ITEM, 400, "invalid_request", item=1, field="items[1]")
score("embedding-is-string", '{"items":[{"id":"a","embedding":"0.1,0.2"}]}', 400, "invalid_request", item=0,
      field="items[0].embedding")
score("embedding-is-object", '{"items":[{"id":"a","embedding":{"0":1}}]}', 400, "invalid_request", item=0,
      field="items[0].embedding")
score("embedding-holds-null", '{"items":[{"id":"a","embedding":[null%s]}]}' % (",0" * (D - 1)),
      400, "invalid_request", item=0, field="items[0].embedding")
score("embedding-holds-bool", '{"items":[{"id":"a","embedding":[true%s]}]}' % (",0" * (D - 1)),
      400, "invalid_request", item=0, field="items[0].embedding")
score("id-is-number", '{"items":[{"id":7,"embedding":%s}]}' % emb(), 400, "invalid_request", item=0,
      field="items[0].id")
score("id-empty", '{"items":[{"id":"","embedding":%s}]}' % emb(), 400, "invalid_request", item=0,
      field="items[0].id")
score("id-too-long", '{"items":[{"id":"%s","embedding":%s}]}' % ("x" * 257, emb()), 400, "invalid_request",
      item=0, field="items[0].id")
score("id-with-nul", '{"items":[{"id":"a\\u0000b","embedding":%s}]}' % emb(), 400, "invalid_json",
      note="jansson refuses \\u0000 in strings")
score("id-missing", '{"items":[%s,{"embedding":%s}]}' % (GOOD_ITEM, emb()), 400, "missing_id", item=1,
      field="items[1].id")
score("id-null", '{"items":[{"id":null,"embedding":%s}]}' % emb(), 400, "missing_id", item=0, field="items[0].id")
score("model-is-number", '{"model":1,"items":[%s]}' % GOOD_ITEM, 400, "invalid_request", field="model")
score("model-unknown", '{"model":"no_such_model","items":[%s]}' % GOOD_ITEM, 404, "model_not_found", field="model")
score("model-with-path", '{"model":"../tiny_binary","items":[%s]}' % GOOD_ITEM, 404, "model_not_found",
      field="model")
score("return-vector-is-string", '{"return_vector":"yes","items":[%s]}' % GOOD_ITEM, 400, "invalid_request",
      field="return_vector")
score("unknown-top-field", '{"items":[%s],"priority":1}' % GOOD_ITEM, 400, "invalid_request", field="priority")
score("unknown-item-field", '{"items":[{"id":"a","embedding":%s,"text":"hi"}]}' % emb(), 400, "invalid_request",
      item=0, field="items[0].text")
score("both-embedding-forms", '{"items":[{"id":"a","embedding":%s,"embedding_b64":"%s"}]}' % (emb(), b64(GOOD)),
      400, "invalid_request", item=0, field="items[0]")
score("no-embedding", '{"items":[{"id":"a"}]}', 400, "invalid_request", item=0, field="items[0]")

# ---- duplicate keys
score("duplicate-top-key", '{"items":[%s],"items":[%s]}' % (GOOD_ITEM, GOOD_ITEM), 400, "invalid_json")
score("duplicate-item-id", '{"items":[{"id":"a","id":"b","embedding":%s}]}' % emb(), 400, "invalid_json")
score("duplicate-embedding", '{"items":[{"id":"a","embedding":%s,"embedding":%s}]}' % (emb(), emb()),
      400, "invalid_json")
score("duplicate-model-escaped", '{"model":"tiny_binary","mod\\u0065l":"tiny_multi","items":[%s]}' % GOOD_ITEM,
      400, "invalid_json", note="the same key written once plainly and once with an escape")

# ---- invalid UTF-8
score("utf8-invalid-byte", b'{"items":[{"id":"\xff","embedding":' + emb().encode() + b"}]}", 400, "invalid_json")
score("utf8-overlong", b'{"items":[{"id":"\xc0\xaf","embedding":' + emb().encode() + b"}]}", 400, "invalid_json")
score("utf8-surrogate-bytes", b'{"items":[{"id":"\xed\xa0\x80","embedding":' + emb().encode() + b"}]}",
      400, "invalid_json")
score("utf8-truncated-sequence", b'{"items":[{"id":"\xe2\x82","embedding":' + emb().encode() + b"}]}",
      400, "invalid_json")
score("lone-surrogate-escape", '{"items":[{"id":"\\ud800","embedding":%s}]}' % emb(), 400, "invalid_json")
score("bad-escape", '{"items":[{"id":"\\q","embedding":%s}]}' % emb(), 400, "invalid_json")
score("raw-control-char", '{"items":[{"id":"a\tb","embedding":%s}]}' % emb(), 400, "invalid_json")

# ---- base64
one_short = b64(GOOD[:-1])
score("b64-one-value-short", '{"items":[{"id":"a","embedding_b64":"%s"}]}' % one_short, 400, "dimension_mismatch",
      item=0, field="items[0].embedding_b64")
score("b64-one-value-long", '{"items":[{"id":"a","embedding_b64":"%s"}]}' % b64(GOOD + [0.5]), 400,
      "dimension_mismatch", item=0, field="items[0].embedding_b64")
score("b64-partial-float", '{"items":[{"id":"a","embedding_b64":"%s"}]}' % base64.b64encode(b"\0" * 127).decode(),
      400, "invalid_base64", item=0, field="items[0].embedding_b64")
score("b64-url-alphabet", '{"items":[{"id":"a","embedding_b64":"%s"}]}' %
      b64_bits([0xfbfffbff] * D).replace("+", "-").replace("/", "_"), 400, "invalid_base64", item=0,
      field="items[0].embedding_b64")
score("b64-missing-padding", '{"items":[{"id":"a","embedding_b64":"%s"}]}' %
      base64.b64encode(b"\0" * 4 * (D - 1) + b"\0\0").decode().rstrip("="), 400, "invalid_base64", item=0,
      field="items[0].embedding_b64")
score("b64-with-newlines", '{"items":[{"id":"a","embedding_b64":"%s\\n%s"}]}' % (b64(GOOD)[:60], b64(GOOD)[60:]),
      400, "invalid_base64", item=0, field="items[0].embedding_b64")
score("b64-garbage-too-long", '{"items":[{"id":"a","embedding_b64":"%s"}]}' % ("!*" * 200), 400, "invalid_base64",
      item=0, field="items[0].embedding_b64")
score("b64-nan-bits", '{"items":[%s,{"id":"b","embedding_b64":"%s"}]}' %
      (GOOD_ITEM, b64_bits([0x3e000000] * (D - 1) + [0x7fc00000])), 400, "non_finite_value", item=1,
      field="items[1].embedding_b64")
score("b64-inf-bits", '{"items":[{"id":"a","embedding_b64":"%s"}]}' % b64_bits([0xff800000] + [0] * (D - 1)),
      400, "non_finite_value", item=0, field="items[0].embedding_b64")
score("b64-non-ascii-letters", '{"items":[{"id":"a","embedding_b64":"%s"}]}' % ("\u00e9" + b64(GOOD)[2:]), 400,
      "invalid_base64", item=0, field="items[0].embedding_b64",
      note="fuzz finding: libsodium 1.0.18 decodes every byte >= 0x80 as '/': this was scored (200)")
score("b64-is-number", '{"items":[{"id":"a","embedding_b64":12}]}', 400, "invalid_request", item=0,
      field="items[0].embedding_b64")
score("b64-empty", '{"items":[{"id":"a","embedding_b64":""}]}', 400, "dimension_mismatch", item=0,
      field="items[0].embedding_b64")

# ---- batch size and dimension
score("items-empty", '{"items":[]}', 400, "empty_batch", field="items")
score("too-many-items", '{"items":[%s]}' % ",".join(['{"id":"i%d","embedding":%s}' % (i, emb(v="0")) for i in range(9)]),
      413, "batch_too_large", field="items", note="--max-batch 8")
score("dimension-short", '{"items":[{"id":"a","embedding":%s}]}' % emb(D - 1), 400, "dimension_mismatch", item=0,
      field="items[0].embedding")
score("dimension-long", '{"items":[{"id":"a","embedding":%s}]}' % emb(D + 1), 400, "dimension_mismatch", item=0,
      field="items[0].embedding")
score("dimension-empty", '{"items":[{"id":"a","embedding":[]}]}', 400, "dimension_mismatch", item=0,
      field="items[0].embedding")
score("dimension-wrong-on-item-2", '{"items":[%s,%s,{"id":"c","embedding":%s}]}' % (GOOD_ITEM, GOOD_ITEM, emb(1024)),
      400, "dimension_mismatch", item=2, field="items[2].embedding")

# ---- headers that lie, body limits, content types
body_ok = '{"items":[%s]}' % GOOD_ITEM
case("content-length-larger-than-body", None, None,
     request(body=body_ok, length=len(body_ok) + 100),
     note="the daemon waits for the rest; no answer, the connection closes when the client's does")
case("content-length-smaller-than-body", 400, "empty_batch",
     request(body='{"items":[]}GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n', length=len('{"items":[]}')),
     field="items", note="the bytes after Content-Length are the next request on the connection")
case("content-length-cuts-json", 400, "invalid_json", request(body=body_ok, length=len(body_ok) // 2),
     note="the rest of the body is garbage as a next request")
case("content-length-over-limit", 413, "payload_too_large", request(body=b"", length=100000),
     note="refused from the headers, before any body byte; --max-body-bytes 16384")
case("content-length-huge", 413, None, request(body=b"", length="99999999999999999999"),
     note="libmicrohttpd refuses a length it cannot represent")
case("content-length-negative", 400, None, request(body=body_ok, length="-1"),
     note="libmicrohttpd refuses the header itself")
case("content-length-not-a-number", 400, None, request(body=body_ok, length="abc"))
case("content-length-twice-differing", 400, "invalid_request",
     request(body=body_ok, length=None, extra=(f"Content-Length: {len(body_ok)}", "Content-Length: 5")),
     note="request smuggling: two lengths, the daemon must not pick one")
case("content-length-and-chunked", 400, "invalid_request",
     request(body=b"%x\r\n%s\r\n0\r\n\r\n" % (len(body_ok), body_ok.encode()), length=5,
             extra=("Transfer-Encoding: chunked",)),
     note="request smuggling: Content-Length and Transfer-Encoding together")
case("body-over-limit-chunked", 413, "payload_too_large",
     request(body=b"%x\r\n%s\r\n0\r\n\r\n" % (17000, b" " * 17000), length=None, extra=("Transfer-Encoding: chunked",)),
     note="no Content-Length: counted while reading")
case("chunked-bad-size", 400, None,
     request(body=b"zz\r\n{}\r\n0\r\n\r\n", length=None, extra=("Transfer-Encoding: chunked",)))
score("content-type-missing", body_ok, 415, "unsupported_media_type", ctype=None)
score("content-type-text", body_ok, 415, "unsupported_media_type", ctype="text/plain")
score("content-type-form", body_ok, 415, "unsupported_media_type", ctype="application/x-www-form-urlencoded")
score("content-type-jsonx", body_ok, 415, "unsupported_media_type", ctype="application/jsonx")
score("content-type-multipart", body_ok, 415, "unsupported_media_type", ctype="multipart/form-data; boundary=x")

# ---- application/octet-stream
row = struct.pack("<%df" % D, *GOOD)
score("octets-partial-row", row[:-1], 400, "dimension_mismatch", field="body", ctype="application/octet-stream")
score("octets-one-byte", b"\0", 400, "dimension_mismatch", field="body", ctype="application/octet-stream")
score("octets-empty", b"", 400, "empty_batch", field="body", ctype="application/octet-stream")
score("octets-too-many-rows", row * 9, 413, "batch_too_large", field="body", ctype="application/octet-stream")
score("octets-nan-in-row-1", row + struct.pack("<I", 0x7fc00001) + row[4:], 400, "non_finite_value", item=1,
      field="body", ctype="application/octet-stream")
score("octets-inf", row[:-4] + struct.pack("<I", 0x7f800000), 400, "non_finite_value", item=0, field="body",
      ctype="application/octet-stream")
case("octets-unknown-query", 400, "invalid_request",
     request(path="/v1/score?model=tiny_binary&mode=fast", body=row, ctype="application/octet-stream"), field="mode")
case("octets-repeated-query", 400, "invalid_request",
     request(path="/v1/score?model=tiny_binary&model=tiny_multi", body=row, ctype="application/octet-stream"),
     field="model")
case("octets-unknown-model", 404, "model_not_found",
     request(path="/v1/score?model=nope", body=row, ctype="application/octet-stream"), field="model")
case("octets-bad-return-vector", 400, "invalid_request",
     request(path="/v1/score?return_vector=maybe", body=row, ctype="application/octet-stream"), field="return_vector")
score("octets-ids-not-json", row, 400, "invalid_request", field="Pgcld-Item-Ids", ctype="application/octet-stream",
      extra=("Pgcld-Item-Ids: [a, b",))
score("octets-ids-wrong-count", row, 400, "invalid_request", field="Pgcld-Item-Ids",
      ctype="application/octet-stream", extra=('Pgcld-Item-Ids: ["a","b"]',))
score("octets-ids-empty-string", row * 2, 400, "invalid_request", item=1, field="Pgcld-Item-Ids",
      ctype="application/octet-stream", extra=('Pgcld-Item-Ids: ["a",""]',))

# ---- authorization
score("auth-missing", body_ok, 401, "unauthorized", auth=None)
score("auth-empty-bearer", body_ok, 401, "unauthorized", auth="Authorization: Bearer ")
score("auth-basic", body_ok, 401, "unauthorized", auth="Authorization: Basic dXNlcjpwYXNz")
score("auth-unknown-key", body_ok, 401, "unauthorized", auth="Authorization: Bearer pgcld_" + "0" * 40)
score("auth-huge-token", body_ok, 401, "unauthorized", auth="Authorization: Bearer " + "A" * 6000)
score("auth-reviewer-key", body_ok, 403, "forbidden", auth="REVIEWER")
score("auth-admin-key", body_ok, 403, "forbidden", auth="ADMIN")
v2("auth-v2-missing", v2_json([1, D], emb()), 401, "unauthorized", auth=None)

# ---- routes and methods
case("method-get-score", 405, "method_not_allowed", request(method="GET", body=b"", length=None))
case("unknown-route", 404, "not_found", request(path="/v1/scores", body=body_ok))

# ---- KServe v2 infer, JSON
v2("v2-invalid-json", '{"inputs":[', 400, "invalid_json")
v2("v2-not-object", "[1,2]", 400, "invalid_request")
v2("v2-no-inputs", '{"id":"x"}', 400, "invalid_request", field="inputs")
v2("v2-inputs-empty", '{"inputs":[]}', 400, "invalid_request", field="inputs")
v2("v2-model-name-mismatch", v2_json([1, D], emb(), extra=',"model_name":"other_model"'), 400, "model_name_mismatch",
   field="model_name")
v2("v2-duplicate-member", '{"inputs":[],"inputs":[]}', 400, "invalid_json")
v2("v2-tensor-without-name", '{"inputs":[{"datatype":"FP32","shape":[1,%d],"data":%s}]}' % (D, emb()),
   400, "invalid_request", field="inputs[0]")
v2("v2-wrong-dimension", v2_json([1, D + 1], emb(D + 1)), 400, "dimension_mismatch", field="inputs[0]")
v2("v2-data-count-mismatch", v2_json([2, D], emb()), 400, "dimension_mismatch", field="inputs[0]")
v2("v2-datatype-fp64", v2_json([1, D], emb(), dtype="FP64"), 400, "invalid_request", field="inputs[0]")
v2("v2-shape-rank-3", v2_json([1, 1, D], emb()), 400, "invalid_request", field="inputs[0]")
v2("v2-shape-zero-rows", v2_json([0, D], "[]"), 400, "empty_batch", field="inputs[0]")
v2("v2-shape-negative-rows", v2_json([-1, D], emb()), 400, "empty_batch", field="inputs[0]")
v2("v2-too-many-rows", v2_json([9, D], "[" + ",".join([emb(v="0")] * 9) + "]"), 413, "batch_too_large",
   field="inputs[0]")
v2("v2-data-holds-string", v2_json([1, D], '["x"%s]' % (",0" * (D - 1))), 400, "invalid_request", field="inputs[0]")
v2("v2-data-not-array", v2_json([1, D], '"abc"'), 400, "invalid_request", field="inputs[0]")
v2("v2-data-overflow", v2_json([1, D], "[1e39%s]" % (",0" * (D - 1))), 400, "non_finite_value", item=0,
   field="inputs[0]")
v2("v2-unknown-input", v2_json([1, D], emb(), name="text"), 400, "invalid_request", field="inputs[0]")
v2("v2-two-embeddings", '{"inputs":[%s,%s]}' % (v2_json([1, D], emb())[11:-2], v2_json([1, D], emb())[11:-2]),
   400, "invalid_request", field="inputs[1]")
v2("v2-ids-wrong-count", '{"inputs":[{"name":"embedding","datatype":"FP32","shape":[1,%d],"data":%s},'
   '{"name":"id","datatype":"BYTES","shape":[2],"data":["a","b"]}]}' % (D, emb()), 400, "invalid_request",
   field="inputs.id")
v2("v2-unknown-model", v2_json([1, D], emb()), 404, "model_not_found", model="no_such_model")
v2("v2-content-type-text", v2_json([1, D], emb()), 415, "unsupported_media_type", ctype="text/plain")

# ---- KServe v2 infer, binary tensor extension
rows1 = row
v2_bin_case("v2-bin-header-length-over-body", {"inputs": [emb_tensor(1)]}, rows1, 400, "invalid_request",
            ihcl=5000, field="Inference-Header-Content-Length")
v2_bin_case("v2-bin-header-length-not-number", {"inputs": [emb_tensor(1)]}, rows1, 400, "invalid_request",
            ihcl="12a", field="Inference-Header-Content-Length")
v2_bin_case("v2-bin-header-length-negative", {"inputs": [emb_tensor(1)]}, rows1, 400, "invalid_request",
            ihcl="-5", field="Inference-Header-Content-Length")
v2_bin_case("v2-bin-header-length-too-small", {"inputs": [emb_tensor(1)]}, rows1, 400, "invalid_json", ihcl=20,
            note="the header is cut in the middle")
v2_bin_case("v2-bin-size-past-body", {"inputs": [emb_tensor(1, size=4 * D + 4)]}, rows1, 400, "invalid_request",
            field="inputs[0]")
v2_bin_case("v2-bin-size-negative", {"inputs": [emb_tensor(1, size=-4)]}, rows1, 400, "invalid_request",
            field="inputs[0]")
v2_bin_case("v2-bin-size-not-shape", {"inputs": [emb_tensor(2, size=4 * D)]}, rows1, 400, "dimension_mismatch",
            field="inputs[0]")
v2_bin_case("v2-bin-unclaimed-bytes", {"inputs": [emb_tensor(1)]}, rows1 + b"\0\0\0\0", 400, "invalid_request")
v2_bin_case("v2-bin-nan", {"inputs": [emb_tensor(1)]}, rows1[:-4] + struct.pack("<I", 0x7fc00000), 400,
            "non_finite_value", field="inputs[0]")
v2_bin_case("v2-bin-shape-overflow", {"inputs": [{"name": "embedding", "datatype": "FP32", "shape": [2 ** 57 + 1, D],
                                                 "parameters": {"binary_data_size": 4 * D}}]}, rows1,
            413, "batch_too_large", field="inputs[0]",
            note="rows x D x 4 wraps around 2^64 to the binary size: must not be accepted as one row")
v2_bin_case("v2-bin-shape-negative", {"inputs": [{"name": "embedding", "datatype": "FP32", "shape": [-1, D],
                                                 "parameters": {"binary_data_size": 4 * D}}]}, rows1,
            400, "empty_batch", field="inputs[0]")
v2_bin_case("v2-bin-shape-not-integer", {"inputs": [{"name": "embedding", "datatype": "FP32", "shape": [1.0, D],
                                                    "parameters": {"binary_data_size": 4 * D}}]}, rows1,
            400, "invalid_request", field="inputs[0]")
v2("v2-shape-strings", v2_json(["1", str(D)], emb()), 400, "invalid_request", field="inputs[0]")
v2_bin_case("v2-bin-id-tensor-binary", {"inputs": [emb_tensor(1), {"name": "id", "datatype": "BYTES", "shape": [1],
                                                                    "parameters": {"binary_data_size": 1}}]},
            rows1 + b"a", 400, "invalid_request", field="inputs[1]")
v2_bin_case("v2-bin-empty", {"inputs": [emb_tensor(0)]}, b"", 400, "empty_batch", field="inputs[0]")

# ---- finite inputs that overflow inside the model (fuzz finding: recorded as "allow" with NaN probabilities)
score("huge-values-overflow-model", '{"items":[%s,{"id":"b","embedding":%s}]}' % (GOOD_ITEM, emb(v="3e38")), 400,
      "non_finite_value", item=1, note="3e38 is a finite float32; the model's output is not")
score("octets-huge-values-overflow-model", row + struct.pack("<%df" % D, *([2.5e38] * D)), 400, "non_finite_value",
      item=1, ctype="application/octet-stream")
v2("v2-huge-values-overflow-model", v2_json([1, D], emb(v="-3.3e38")), 400, "non_finite_value", item=0)

# ---- client text quoted in errors that is not UTF-8 (or cut inside a character)
_key = "x" + "\u00e9" * 40
score("unknown-field-cut-in-character", '{"items":[],"%s":1}' % _key, 400, "invalid_request", field="x" + "\u00e9" * 40,
      note="the message quotes the name cut to 64 bytes, inside a 2-byte character: was 500 internal_error")
score("unknown-item-field-cut-in-character", '{"items":[{"id":"a","embedding":%s,"x%s":1}]}' % (emb(), "\u00e9" * 20),
      400, "invalid_request", item=0, note="the field is cut to 32 bytes inside a character: was 500")
case("path-invalid-utf8", 404, "not_found", request(method="GET", path="/v1/\xff\xfe", body=b"", length=None),
     note="was a 404 with an empty body")
case("query-name-invalid-utf8", 400, "invalid_request",
     request(path="/v1/score?\xff=1", body=row, ctype="application/octet-stream"), note="was 500 internal_error")
score("content-type-invalid-utf8", body_ok, 415, "unsupported_media_type", ctype="text/\xff\xfe",
      note="was 500 internal_error")

# ---- model upload (admin): a checkpoint whose config declares huge dimensions for tiny weights
with open(os.path.join(HERE, os.pardir, "fuzz", "corpus", "fuzz_checkpoint", "regress-huge-dims-tiny-weights"),
          "rb") as f:
    _blob = f.read()
_clen = struct.unpack("<I", _blob[:4])[0]
_weights = _blob[4 + _clen:]
import hashlib  # noqa: E402
case("upload-huge-dims-tiny-weights", 422, "invalid_checkpoint",
     request(method="PUT", path="/v1/admin/models/tiny_binary/versions/9", auth="ADMIN",
             body=json.dumps({"config": json.loads(_blob[4:4 + _clen]),
                              "weights_b64": base64.b64encode(_weights).decode(),
                              "weights_sha256": hashlib.sha256(_weights).hexdigest()})),
     note="fuzz finding: the loader allocated and zeroed 4 GiB (config dims 65536 x 8192) before it "
          "looked at the 1 KiB of weights; now refused before allocating", max_rss_growth_mib=512)

score("key-with-nul", '{"items":[{"id":"a","embedding\\u0000":%s}]}' % emb(), 400, "invalid_json",
      note="fuzz finding: the fast parser compared the decoded key as a C string and took "
           "\"embedding\\u0000\" for \"embedding\"; jansson refuses a NUL in a key")
score("top-key-with-nul", '{"items\\u0000":[%s]}' % GOOD_ITEM, 400, "invalid_json")


# ---- issue 13: the request's head (server/http/request_head.c), checked before routing; every refusal
# closes the connection. Each group is a class: more cases of each are kept outside the repository.
def raw(*lines, body=b""):
    """A request from raw head lines (str or bytes), exactly as given, then the body."""
    head = b"\r\n".join(x if isinstance(x, bytes) else x.encode("latin-1") for x in lines)
    return head + b"\r\n\r\n" + body


_AUTH = "Authorization: Bearer {{SCORER}}"
_JSON = "Content-Type: application/json"
_body = ('{"items":[%s]}' % GOOD_ITEM).encode()
_len = f"Content-Length: {len(_body)}"

# framing: Transfer-Encoding other than chunked (answered 501 at once; it used to hold the
# connection until the request timeout), or in HTTP/1.0
for _te in ("gzip, chunked", "gzip", "identity", "chunked, chunked", "x-custom"):
    case("te-" + _te.replace(", ", "-then-"), 501, "not_implemented",
         raw("POST /v1/score HTTP/1.1", "Host: 127.0.0.1", _AUTH, _JSON, f"Transfer-Encoding: {_te}",
             body=b"%x\r\n" % len(_body) + _body + b"\r\n0\r\n\r\n"), field="Transfer-Encoding", max_seconds=5)
case("te-in-http10", 400, "invalid_request",
     raw("POST /v1/score HTTP/1.0", _AUTH, _JSON, "Transfer-Encoding: chunked",
         body=b"%x\r\n" % len(_body) + _body + b"\r\n0\r\n\r\n"), field="Transfer-Encoding")
# header field names that are not tokens: libmicrohttpd keeps the whitespace in the name, so
# "Content-Length : N" was no length at all and the body was read as the next request
case("header-name-space-before-colon", 400, "invalid_request",
     raw("POST /v1/score HTTP/1.1", "Host: 127.0.0.1", _AUTH, _JSON, f"Content-Length : {len(_body)}", body=_body),
     field="headers")
case("header-name-tab-before-colon", 400, "invalid_request",
     raw("POST /v1/score HTTP/1.1", "Host: 127.0.0.1", _AUTH, _JSON, f"Content-Length\t: {len(_body)}", body=_body),
     field="headers")
case("header-name-with-slash", 400, "invalid_request",
     raw("GET /v1/models HTTP/1.1", "Host: 127.0.0.1", _AUTH, "X/Y: 1"), field="headers")
# bytes hidden behind a NUL: values are handed out as C strings, so the rest of the line was dropped
# unseen ("a raw NUL after the key in Authorization still authenticates")
case("authorization-nul-then-junk", 400, "invalid_request",
     raw("GET /v1/models HTTP/1.1", "Host: 127.0.0.1", b"Authorization: Bearer {{SCORER}}\0junk"), field="headers")
case("authorization-trailing-nul", 400, "invalid_request",
     raw("GET /v1/models HTTP/1.1", "Host: 127.0.0.1", b"Authorization: Bearer {{SCORER}}\0", "Accept: */*"),
     field="headers")
case("header-nul-after-colon", 400, "invalid_request",
     raw("GET /v1/models HTTP/1.1", "Host: 127.0.0.1", _AUTH, b"X-Note:\0 hidden"), field="headers")
case("header-nul-in-last-line", 400, "invalid_request",
     raw("GET /v1/models HTTP/1.1", "Host: 127.0.0.1", _AUTH, b"X-Note: a\0b"), field="headers")
case("header-control-character", 400, "invalid_request",
     raw("GET /v1/models HTTP/1.1", "Host: 127.0.0.1", _AUTH, b"X-Note: a\x01b"), field="X-Note")
case("header-obs-fold", 400, "invalid_request",
     raw("GET /v1/models HTTP/1.1", "Host: 127.0.0.1", _AUTH, "X-Note: a", " folded"), field="headers")
case("target-raw-nul", 400, "invalid_request",
     raw(b"GET /v1/models\0/../../x HTTP/1.1", "Host: 127.0.0.1", _AUTH), field="path")
case("method-raw-nul", 400, "invalid_request",
     raw(b"GET\0X /v1/models HTTP/1.1", "Host: 127.0.0.1", _AUTH), field="method")
# percent-encoded NUL: the decoded path and query are C strings ("/v1/score%00x" routed to
# /v1/score, "?model=tiny_multi%00x" scored on tiny_multi, "versions/a%00b" made version "a")
score("path-percent-nul-score", _body, 400, "invalid_request", path="/v1/score%00x", field="path")
case("path-percent-nul-version", 400, "invalid_request",
     request(method="PUT", path="/v1/admin/models/tiny_binary/versions/a%00b", auth="ADMIN", body=b"{}"),
     field="path")
case("query-percent-nul-model", 400, "invalid_request",
     request(path="/v1/score?model=tiny_multi%00x", body=struct.pack("<%df" % D, *GOOD), ctype="application/octet-stream"),
     field="query")
case("query-percent-nul-name", 400, "invalid_request",
     request(method="GET", path="/v1/decisions?label%00x=pos", auth="REVIEWER", body=b"", length=None), field="query")
case("query-percent-nul-lowercase-escape", 400, "invalid_request",
     request(method="GET", path="/v1/decisions?item_id=a%00%2500", auth="REVIEWER", body=b"", length=None),
     field="query")
# headers pgcld reads, given twice (which one wins is a guess a proxy may not share)
for _name, _lines in (("content-type", [_JSON, "Content-Type: text/plain"]),
                      ("authorization", [_AUTH, "Authorization: Bearer pgcld_00000000_x"]),
                      ("host", ["Host: b.example"]),
                      ("content-length", [_len]),
                      ("idempotency-key", ["Idempotency-Key: a", "Idempotency-Key: b"])):
    _field = {"content-type": "Content-Type", "authorization": "Authorization", "host": "Host",
              "content-length": "Content-Length", "idempotency-key": "Idempotency-Key"}[_name]
    _head = ["POST /v1/score HTTP/1.1", "Host: 127.0.0.1", _len] + _lines
    if _name not in ("content-type",):
        _head.append(_JSON)
    if _name != "authorization":
        _head.append(_AUTH)
    case(f"two-{_name}-headers", 400, "invalid_request", raw(*_head, body=_body), field=_field)
case("http11-without-host", 400, "invalid_request", raw("GET /v1/models HTTP/1.1", _AUTH), field="Host")
# media types and codings pgcld would misread
score("json-charset-latin1", _body, 415, "unsupported_media_type", ctype="application/json; charset=latin1")
score("json-charset-quoted-utf16", _body, 415, "unsupported_media_type", ctype='application/json; charset="utf-16"')
score("json-parameter-malformed", _body, 415, "unsupported_media_type", ctype="application/json; charset")
v2("v2-json-charset-latin1", v2_json([1, D], emb()), 415, "unsupported_media_type",
   ctype="application/json;charset=ISO-8859-1")
score("content-encoding-gzip", _body, 415, "unsupported_media_type", extra=("Content-Encoding: gzip",),
      field="Content-Encoding")
# query parameters dropped or ignored instead of refused
case("query-filter-without-value", 400, "invalid_request",
     request(method="GET", path="/v1/decisions?label", auth="REVIEWER", body=b"", length=None), field="label")
case("query-unknown-on-models", 400, "invalid_request",
     request(method="GET", path="/v1/models?verbose=1", auth="SCORER", body=b"", length=None), field="verbose")
score("json-with-model-query", _body, 400, "invalid_request", path="/v1/score?model=tiny_multi", field="model")
score("json-with-item-ids-header", _body, 400, "invalid_request", extra=('Pgcld-Item-Ids: ["x"]',),
      field="Pgcld-Item-Ids")
case("query-create-model-not-boolean", 400, "invalid_request",
     request(method="PUT", path="/v1/admin/models/tiny_binary/versions/9?create_model=yes", auth="ADMIN",
             body=b"{}"), field="create_model")
# irregularly nested v2 data: only flat (n*D) or nested exactly as the shape ([n][D])
v2("v2-data-ragged-rows", v2_json([2, D], "[%s,%s]" % (emb(), emb(D - 1))), 400, "invalid_request", field="inputs[0]")
v2("v2-data-deeper-than-shape", v2_json([1, D], "[[%s]]" % emb()), 400, "invalid_request", field="inputs[0]")
v2("v2-data-rows-and-numbers", v2_json([2, D], "[%s%s]" % (emb(), ",0.125" * D)), 400, "invalid_request",
   field="inputs[0]")
v2("v2-data-one-row-as-columns", v2_json([1, D], "[%s]" % ",".join("[0.125]" for _ in range(D))), 400,
   "invalid_request", field="inputs[0]")

# ---- answered by libmicrohttpd itself (code null: its HTML page, then the connection closes);
# documented in openapi.yaml ("Answers libmicrohttpd sends itself")
for _cl, _status in (("+%d" % len(_body), 400), ("%d, %d" % (len(_body), len(_body)), 400), ("-1", 400),
                     ("0x10", 400), ("99999999999999999999999", 413)):
    case("library-content-length-" + {"+": "plus", "-": "negative", "0": "hex", "9": "overflow"}.get(
        _cl[0], "list"), _status, None,
         raw("POST /v1/score HTTP/1.1", "Host: 127.0.0.1", _AUTH, _JSON, f"Content-Length: {_cl}", body=_body),
         note="libmicrohttpd 0.9.75 writes this answer's status line and headers twice")
case("library-chunk-size-overflow", 413, None,
     raw("POST /v1/score HTTP/1.1", "Host: 127.0.0.1", _AUTH, _JSON, "Transfer-Encoding: chunked",
         body=b"FFFFFFFFFFFFFFFFFFFFF\r\nabc"))
case("library-chunk-size-malformed", 400, None,
     raw("POST /v1/score HTTP/1.1", "Host: 127.0.0.1", _AUTH, _JSON, "Transfer-Encoding: chunked",
         body=b"zz\r\nabc\r\n0\r\n\r\n"))
case("library-http-version-2", 505, None, raw("GET /healthz HTTP/2.0", "Host: 127.0.0.1"))
case("library-header-line-without-colon", 400, None, raw("GET /healthz HTTP/1.1", "Host: 127.0.0.1", "NoColonHere"))
case("library-head-too-large", 431, None, raw("GET /healthz HTTP/1.1", "Host: 127.0.0.1", "X-Big: " + "a" * 40000))


# ---- issue 27: a second outside probe. Open Inference Protocol: every input at most once, its name's
# datatype and rank, its shape agreeing with its data and with the embedding count (one check for
# every named input, JSON and binary alike: read_input in server/routes/routes_v2.c).
_E = v2_json([1, D], emb())[11:-2]


def _id_json(vals, shape, dtype="BYTES"):
    return '{"name":"id","datatype":"%s","shape":%s,"data":%s}' % (dtype, json.dumps(shape), json.dumps(vals))


def _id_strings(vals):
    return b"".join(struct.pack("<I", len(v)) + v.encode() for v in vals)


def _id_bin(vals, shape):
    return {"name": "id", "datatype": "BYTES", "shape": shape,
            "parameters": {"binary_data_size": len(_id_strings(vals))}}


v2("v2-two-id-tensors", '{"inputs":[%s,%s,%s]}' % (_E, _id_json(["a"], [1]), _id_json(["b"], [1])), 400,
   "invalid_request", field="inputs[2]", note="the second id tensor replaced the first")
v2("v2-id-twice-around-embedding", '{"inputs":[%s,%s,%s]}' % (_id_json(["a"], [1]), _E, _id_json(["a"], [1])),
   400, "invalid_request", field="inputs[2]")
v2_bin_case("v2-bin-two-id-tensors", {"inputs": [emb_tensor(1), _id_bin(["a"], [1]), _id_bin(["b"], [1])]},
            rows1 + _id_strings(["a"]) + _id_strings(["b"]), 400, "invalid_request", field="inputs[2]")
v2("v2-id-shape-over-data", '{"inputs":[%s,%s]}' % (_E, _id_json(["a"], [2])), 400, "dimension_mismatch",
   field="inputs[1]", note="an id tensor whose shape disagrees with its data was accepted")
v2_bin_case("v2-bin-id-shape-over-strings", {"inputs": [emb_tensor(1), _id_bin(["a"], [3])]},
            rows1 + _id_strings(["a"]), 400, "dimension_mismatch", field="inputs[1]")
v2("v2-id-shape-negative", '{"inputs":[%s,%s]}' % (_E, _id_json(["a"], [-1])), 400, "dimension_mismatch",
   field="inputs[1]")
v2("v2-id-rank-2", '{"inputs":[%s,%s]}' % (_E, _id_json(["a"], [1, 1])), 400, "invalid_request", field="inputs[1]")
v2("v2-id-datatype-fp32", '{"inputs":[%s,%s]}' % (_E, _id_json(["a"], [1], dtype="FP32")), 400, "invalid_request",
   field="inputs[1]")
v2("v2-id-shape-zero-rows", '{"inputs":[%s,%s]}' % (_E, _id_json([], [0])), 400, "invalid_request",
   field="inputs.id", note="the id count must equal the embedding count")
v2("v2-id-no-values", '{"inputs":[%s,{"name":"id","datatype":"BYTES","shape":[1]}]}' % _E, 400, "invalid_request",
   field="inputs[1]")
v2_bin_case("v2-bin-embedding-data-and-binary", {"inputs": [dict(emb_tensor(1), data=[0.125] * D)]}, rows1, 400,
            "invalid_request", field="inputs[0]")
v2_bin_case("v2-bin-id-data-and-binary", {"inputs": [emb_tensor(1), dict(_id_bin(["a"], [1]), data=["a"])]},
            rows1 + _id_strings(["a"]), 400, "invalid_request", field="inputs[1]")
v2("v2-tensor-parameters-not-object", v2_json([1, D], emb())[:-3] + ',"parameters":5}]}', 400, "invalid_request",
   field="inputs[0]")
v2("v2-duplicate-output", v2_json([1, D], emb(), extra=',"outputs":[{"name":"label"},{"name":"label"}]'), 400,
   "invalid_request", field="outputs[1]")


# ---- issue 27: header values are read without their optional whitespace (RFC 9110 s5.5: SP and HTAB
# at either end; server/http/header_field.c is the one reader), and nothing else is trimmed.
_chunked = b"%x\r\n" % len(_body) + _body + b"\r\n0\r\n\r\n"
for _name, _te in (("space", "chunked "), ("tab", "chunked\t")):
    case(f"te-chunked-trailing-{_name}", 400, "invalid_request",
         raw("POST /v1/score HTTP/1.1", "Host: 127.0.0.1", _AUTH, _JSON, f"Transfer-Encoding: {_te}", body=_chunked),
         field="Transfer-Encoding", note="libmicrohttpd frames by the value as sent: refused at once, never hung")
case("idempotency-key-trailing-nbsp", 400, "invalid_request",
     raw("POST /v1/score HTTP/1.1", "Host: 127.0.0.1", _AUTH, _JSON, _len, b"Idempotency-Key: k\xa0", body=_body),
     field="Idempotency-Key", note="a no-break space is not optional whitespace")
case("authorization-trailing-nbsp", 401, "unauthorized",
     raw("GET /v1/decisions?limit=1 HTTP/1.1", "Host: 127.0.0.1", b"Authorization: Bearer {{REVIEWER}}\xa0"))
for _name, _value in (("inference-header-length-two-numbers", "5 5"),
                      ("inference-header-length-huge", "99999999999999999999999")):
    case(f"v2-{_name}", 400, "invalid_request",
         raw("POST /v2/models/tiny_binary/infer HTTP/1.1", "Host: 127.0.0.1", _AUTH,
             "Content-Type: application/octet-stream", f"Content-Length: {len(_body)}",
             f"Inference-Header-Content-Length: {_value}", body=_body),
         field="Inference-Header-Content-Length")


# ---- issue 27: an integer parameter is malformed (400) or beyond what exists (404), whatever its size
def _reviewer_get(path):
    return request(method="GET", path=path, body=b"", ctype=None, auth="REVIEWER")


# (a well-formed size beyond the log, 404 whatever its size, needs the log's writer named on a fleet
# store: test_consistency checks it)
for _name, _second in (("exponent", "1e30"), ("plus", "%2B5"), ("trailing-space", "5%20"), ("hex", "0x10")):
    case(f"consistency-second-{_name}", 400, "invalid_request",
         _reviewer_get(f"/v1/audit/consistency?first=1&second={_second}"), field="second")
case("consistency-first-2p64-over-second", 400, "invalid_request",
     _reviewer_get("/v1/audit/consistency?first=18446744073709551616&second=5"), field="first")
case("library-content-length-malformed-then-number", 400, None,
     raw("POST /v1/score HTTP/1.1", "Host: 127.0.0.1", _AUTH, _JSON, "Content-Length: abc", f"Content-Length: {len(_body)}",
         body=_body),
     note="libmicrohttpd frames by the first Content-Length: its refusal is judged by that one, not the repeat")
case("decisions-limit-2p64", 400, "invalid_request", _reviewer_get("/v1/decisions?limit=18446744073709551616"),
     field="limit")
case("contests-limit-exponent", 400, "invalid_request", _reviewer_get("/v1/contests?limit=1e3"), field="limit")


def main():
    for f in os.listdir(HERE):
        if f.endswith(".http"):
            os.remove(os.path.join(HERE, f))
    names = set()
    for i, (name, exp, raw) in enumerate(CASES, 1):
        assert name not in names, name
        names.add(name)
        with open(os.path.join(HERE, "%03d-%s.http" % (i, name)), "wb") as f:
            f.write(b"#! " + json.dumps(exp, sort_keys=True).encode() + b"\n" + raw)
    print(f"{len(CASES)} cases written to {HERE}")


if __name__ == "__main__":
    main()
