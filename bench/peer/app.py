"""The peer: POST /v1/score as a competent team would write it in an afternoon with FastAPI + PyTorch.

Same checkpoint directories (loaded through train/load.py), same request and answer shape as
pgcld's POST /v1/score, the same decision rows in SQLite (the decisions table of
migrations/0001_decisions.sql, WAL, synchronous=FULL), one transaction per request, and the answer
leaves only after the commit. It is the throughput baseline of bench/run.sh, in its best setting:

* uvicorn with uvloop and httptools, no access log (bench/peer/run.sh);
* the body is read raw and parsed with json.loads (no pydantic model: validating 64 x 1024 floats
  through pydantic costs more than everything else together), embeddings become one float32
  numpy array, base64 goes through base64.b64decode + numpy.frombuffer;
* torch.inference_mode; one intra-op thread per worker, OpenBLAS (torch's BLAS on Debian) with all
  cores for a single worker and one thread per worker with several (bench/run.sh sets
  OPENBLAS_NUM_THREADS=1 for --workers 2);
* the handler runs in the event loop, commit included (PEER_MODE=loop, the default): on 2 cores this
  gave more requests/s and a p99 5-10x lower at batch 1 than handing the work to the thread pool
  (PEER_MODE=thread, one SQLite connection per thread, the fsync overlapping other requests' parsing),
  where 40 threads contend for the GIL;
* the answer is serialised once with json.dumps into a plain Response (not FastAPI's
  jsonable_encoder, which walks every float).

Environment: PEER_MODELS (model repository, default <repo>/models), PEER_DB (SQLite file, default
peer-audit.db), PEER_DEFAULT_MODEL (default toxicity), PEER_TORCH_THREADS (default 1),
PEER_MAX_BATCH (default 1024), PEER_MODE (loop: work in the event loop, the default; thread: in the
thread pool).

Run: bench/peer/run.sh --port 8090 --workers 2 (uvicorn bench.peer.app:app from the repository
root).
"""

import base64
import binascii
import datetime
import fcntl
import hashlib
import json
import os
import re
import sqlite3
import sys
import threading
import time

import numpy as np
import torch
from fastapi import FastAPI, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), os.pardir, os.pardir))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
from train.load import load_checkpoint  # noqa: E402  (needs ROOT on sys.path)

MODELS_DIR = os.environ.get("PEER_MODELS", os.path.join(ROOT, "models"))
DB_PATH = os.environ.get("PEER_DB", "peer-audit.db")
DEFAULT_MODEL = os.environ.get("PEER_DEFAULT_MODEL", "toxicity")
MAX_BATCH = int(os.environ.get("PEER_MAX_BATCH", "1024"))
MODE = os.environ.get("PEER_MODE", "loop")
MAX_ID_BYTES = 256
SCHEMA = os.path.join(ROOT, "migrations", "0001_decisions.sql")

torch.set_num_threads(int(os.environ.get("PEER_TORCH_THREADS", "1")))


# --------------------------------------------------------------------------- models

class Served:
    """One loaded checkpoint version with what the answer and the audit row need."""

    def __init__(self, name, version, directory):
        self.model, config = load_checkpoint(directory)
        self.name, self.version = name, version
        with open(os.path.join(directory, "model.safetensors"), "rb") as f:
            self.sha256 = hashlib.sha256(f.read()).hexdigest()
        self.task = config["task"]
        self.labels = config["labels"]
        self.D, self.d, self.K = config["dims"]["D"], config["dims"]["d"], config["dims"]["K"]
        self.policy = config["decision_policy"]
        self.policy_text = json.dumps(self.policy, separators=(",", ":"))
        if self.policy["kind"] == "threshold":
            self.t_review, self.t_block = self.policy["t_review"], self.policy["t_block"]
            self.score_index = self.labels.index(self.policy["label"])
        else:
            self.t_review = self.t_block = None
            actions = {"allow": 0, "review": 1, "block": 2}
            self.actions = np.array([actions[self.policy["actions"].get(lab, "allow")] for lab in self.labels])
            self.min_confidence = self.policy.get("min_confidence", 0.0)
        self.model_info = {"name": name, "version": version, "sha256": self.sha256, "task": self.task}

    def decide(self, probs):
        """(label_index, decision code 0 allow / 1 review / 2 block) for (n, K) probabilities."""
        label_index = probs.argmax(axis=1)
        if self.policy["kind"] == "threshold":
            score = probs[:, self.score_index].astype(np.float64)
            decision = np.where(score >= self.t_block, 2, np.where(score >= self.t_review, 1, 0))
        else:
            decision = self.actions[label_index]
            top = probs[np.arange(len(probs)), label_index].astype(np.float64)
            decision = np.where((decision == 0) & (top < self.min_confidence), 1, decision)
        return label_index, decision


def _version_key(v):
    return [(0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.split(r"[.]", v)]


def load_models(directory):
    """Each model's highest version that loads (pgcld serves the last activated one; none are here)."""
    models = {}
    for name in sorted(os.listdir(directory)):
        mdir = os.path.join(directory, name)
        if not os.path.isdir(mdir):
            continue
        for version in sorted(os.listdir(mdir), key=_version_key, reverse=True):
            try:
                models[name] = Served(name, version, os.path.join(mdir, version))
                break
            except (OSError, ValueError, KeyError) as e:
                print(f"peer: {name}/{version} not loaded: {e}", file=sys.stderr)
    return models


MODELS = load_models(MODELS_DIR)
DECISIONS = ("allow", "review", "block")


# --------------------------------------------------------------------------- audit log

def _init_db():
    with open(DB_PATH + ".init-lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # workers start together; one creates the schema
        conn = sqlite3.connect(DB_PATH)
        conn.execute("PRAGMA journal_mode=WAL")
        if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'decisions'").fetchone() is None:
            with open(SCHEMA, encoding="utf-8") as f:
                conn.executescript(f.read())
        conn.close()


_init_db()
_local = threading.local()

INSERT = ("INSERT INTO decisions (decision_id, created_at, request_id, item_id, model_name, model_version,"
          " model_sha256, label, label_index, probabilities, toxicity, decision, policy, t_review, t_block,"
          " vector, input_sha256, latency_us) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)")


def db():
    conn = getattr(_local, "conn", None)
    if conn is None:
        conn = sqlite3.connect(DB_PATH, isolation_level=None, check_same_thread=False, timeout=30.0)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        _local.conn = conn
    return conn


def uuid7():
    ms = time.time_ns() // 1_000_000
    r = int.from_bytes(os.urandom(10), "big")
    v = (ms << 80) | (0x7 << 76) | ((r >> 64) & 0xFFF) << 64 | (0b10 << 62) | (r & ((1 << 62) - 1))
    h = f"{v:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


# --------------------------------------------------------------------------- requests

class BadRequest(Exception):
    def __init__(self, status, code, message, item=None, field=None):
        super().__init__(message)
        self.status, self.code, self.item, self.field = status, code, item, field

    def body(self):
        err = {"code": self.code, "message": str(self)}
        if self.item is not None:
            err["item"] = self.item
        if self.field is not None:
            err["field"] = self.field
        return {"error": err}


def parse(body):
    """Validated (model, ids, Z float32 (n, D), return_vector), or BadRequest."""
    try:
        req = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise BadRequest(400, "invalid_json", "the body is not JSON")
    if not isinstance(req, dict):
        raise BadRequest(400, "invalid_request", "the body must be a JSON object")
    for key in req:
        if key not in ("model", "items", "return_vector"):
            raise BadRequest(400, "invalid_request", f"unknown field '{key[:64]}'", field=key)
    name = req.get("model", DEFAULT_MODEL)
    if not isinstance(name, str):
        raise BadRequest(400, "invalid_request", "'model' must be a string", field="model")
    return_vector = req.get("return_vector", True)
    if not isinstance(return_vector, bool):
        raise BadRequest(400, "invalid_request", "'return_vector' must be true or false", field="return_vector")
    items = req.get("items")
    if not isinstance(items, list):
        raise BadRequest(400, "invalid_request", "'items' must be an array of items", field="items")
    if not items:
        raise BadRequest(400, "empty_batch", "'items' is empty: send at least one item", field="items")
    if len(items) > MAX_BATCH:
        raise BadRequest(413, "batch_too_large", f"{len(items)} items exceed the limit of {MAX_BATCH} per request",
                         field="items")
    m = MODELS.get(name)
    if m is None:
        raise BadRequest(404, "model_not_found", f"no model named '{name[:128]}' is being served", field="model")
    ids, rows = [], []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise BadRequest(400, "invalid_request", f"item {i} must be an object", i, f"items[{i}]")
        for key in item:
            if key not in ("id", "embedding", "embedding_b64"):
                raise BadRequest(400, "invalid_request", f"item {i}: unknown field '{key[:64]}'", i,
                                 f"items[{i}].{key[:32]}")
        item_id = item.get("id")
        if item_id is None:
            raise BadRequest(400, "missing_id", f"item {i} has no 'id'", i, f"items[{i}].id")
        if (not isinstance(item_id, str) or not item_id or "\0" in item_id
                or len(item_id.encode("utf-8")) > MAX_ID_BYTES):
            raise BadRequest(400, "invalid_request", f"item {i}: 'id' must be a non-empty string of at most"
                             f" {MAX_ID_BYTES} bytes without NUL", i, f"items[{i}].id")
        ids.append(item_id)
        arr, b64 = item.get("embedding"), item.get("embedding_b64")
        if (arr is None) == (b64 is None):
            raise BadRequest(400, "invalid_request",
                             f"item {i} must have exactly one of 'embedding' and 'embedding_b64'", i, f"items[{i}]")
        if arr is not None:
            field = f"items[{i}].embedding"
            if not isinstance(arr, list):
                raise BadRequest(400, "invalid_request", f"item {i}: 'embedding' must be an array of numbers", i, field)
            if len(arr) != m.D:
                raise BadRequest(400, "dimension_mismatch",
                                 f"item {i}: embedding has {len(arr)} values, model {m.name} expects {m.D}", i, field)
            z = np.array(arr)  # numbers only give float64 or int64; strings, null, nesting give something else
            if z.dtype.kind not in "fi" or z.shape != (m.D,):
                raise BadRequest(400, "invalid_request", f"item {i}: embedding holds a value that is not a number",
                                 i, field)
            with np.errstate(over="ignore"):
                z = z.astype(np.float32)
        else:
            field = f"items[{i}].embedding_b64"
            if not isinstance(b64, str):
                raise BadRequest(400, "invalid_request", f"item {i}: 'embedding_b64' must be a string", i, field)
            try:
                raw = base64.b64decode(b64, validate=True)
            except (binascii.Error, ValueError):
                raise BadRequest(400, "invalid_base64",
                                 f"item {i}: embedding_b64 is not valid padded base64 (standard alphabet)", i, field)
            if len(raw) != 4 * m.D:
                raise BadRequest(400, "dimension_mismatch" if len(raw) % 4 == 0 else "invalid_base64",
                                 f"item {i}: embedding_b64 decodes to {len(raw)} bytes, model {m.name} expects"
                                 f" {m.D} float32 values", i, field)
            z = np.frombuffer(raw, dtype="<f4")
        if not np.isfinite(z).all():
            raise BadRequest(400, "non_finite_value", f"item {i}: a value is not finite as a float32", i, field)
        rows.append(z)
    return m, ids, np.stack(rows), return_vector


def score(body, t_start):
    """Everything after the body arrived: parse, forward, commit the rows, the answer's bytes."""
    m, ids, Z, return_vector = parse(body)
    with torch.inference_mode():
        out = m.model(torch.from_numpy(Z))
    vectors = out["e"].numpy()
    probs = out["probabilities"].numpy()
    label_index, decision = m.decide(probs)

    request_id = uuid7()
    created_at = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    latency_us = int((time.perf_counter() - t_start) * 1e6)
    binary = m.task == "binary"
    probs_list = probs.tolist()
    rows, results = [], []
    for i, item_id in enumerate(ids):
        p = probs_list[i]
        probabilities = dict(zip(m.labels, p))
        li = int(label_index[i])
        dec = DECISIONS[decision[i]]
        decision_id = uuid7()
        rows.append((decision_id, created_at, request_id, item_id, m.name, m.version, m.sha256, m.labels[li], li,
                     json.dumps(probabilities), p[1] if binary else None, dec, m.policy_text, m.t_review, m.t_block,
                     vectors[i].astype("<f4").tobytes(), hashlib.sha256(Z[i].tobytes()).hexdigest(), latency_us))
        r = {"id": item_id, "decision_id": decision_id, "label": m.labels[li], "label_index": li,
             "probabilities": probabilities, "decision": dec}
        if binary:
            r["toxicity"] = p[1]
        if return_vector:
            r["vector"] = vectors[i].tolist()
        results.append(r)
    conn = db()
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.executemany(INSERT, rows)
        conn.execute("COMMIT")  # synchronous=FULL: on disk when this returns
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    answer = {"request_id": request_id, "model": m.model_info, "policy": m.policy, "results": results}
    return json.dumps(answer).encode("utf-8")


# --------------------------------------------------------------------------- HTTP

app = FastAPI(openapi_url=None, docs_url=None, redoc_url=None)


def _error(status, code, message):
    return Response(json.dumps({"error": {"code": code, "message": message}}), status_code=status,
                    media_type="application/json")


@app.post("/v1/score")
async def post_score(request: Request):
    t_start = time.perf_counter()
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype != "application/json":
        return _error(415, "unsupported_media_type", "Content-Type must be application/json")
    body = await request.body()
    try:
        if MODE == "loop":
            payload = score(body, t_start)
        else:
            payload = await run_in_threadpool(score, body, t_start)
    except BadRequest as e:
        return Response(json.dumps(e.body()), status_code=e.status, media_type="application/json")
    except sqlite3.Error as e:
        return Response(json.dumps({"error": {"code": "audit_unavailable", "message": str(e)}}), status_code=503,
                        media_type="application/json", headers={"Retry-After": "1"})
    return Response(payload, media_type="application/json")


@app.get("/healthz")
async def healthz():
    return Response(b'{"status":"ok"}', media_type="application/json")


@app.get("/readyz")
async def readyz():
    ok = bool(MODELS)
    return Response(b'{"status":"ready"}' if ok else b'{"status":"not_ready"}', status_code=200 if ok else 503,
                    media_type="application/json")
