"""The pgcld client: scoring, decisions, contests, resolutions and proofs over pgcld's HTTP API
(openapi.yaml), with the standard library only; numpy is used when it is installed and the caller
passes arrays.

Wire forms of POST /v1/score, chosen for speed:
- a 2-D numpy array (n, D) goes as one ``application/octet-stream`` body of n x D little-endian
  float32 (no text encoding at all), the model in the query and the ids in ``Pgcld-Item-Ids``;
  when the ids would make that header too large, it goes as JSON with ``embedding_b64`` instead;
- any other sequence of rows (lists of floats, 1-D arrays) goes as JSON items, each row packed
  to float32 and sent as ``embedding_b64``, which pgcld decodes to the same float32 values it
  would parse from JSON numbers (a row that float32 cannot hold, or that holds something other
  than numbers, goes as JSON numbers so that pgcld names the item and the value).

Retries: a request is retried, up to ``retries`` times, when pgcld answers 429 or 503 (nothing was
scored or written), 409 ``idempotency_in_flight`` (an earlier attempt of the same scoring request
is still being answered), or when no answer came back and repeating it is safe: reads, and every
scoring request, which carries an ``Idempotency-Key`` (one per call of ``score``, the same on each
attempt), so that pgcld scores and records it once and answers a repeat with the stored answer.
Contests and resolutions carry no key: they are retried only when the connection was refused (the
request surely never arrived). The wait before a retry is the answer's ``Retry-After`` when it has
one (a longer one than ``max_wait`` ends the retries), else an exponential backoff.

A Client keeps one HTTP connection per thread, so one Client may be shared by threads."""

import base64
import datetime
import email.utils
import http.client
import json
import struct
import threading
import time
import urllib.parse
import uuid

from .errors import PgcldConnectionError, PgcldError

try:  # optional: arrays go on the wire as raw float32
    import numpy as _np
except ImportError:  # pragma: no cover - exercised where numpy is absent
    _np = None

__version__ = "0.1.0"

# Pgcld-Item-Ids travels in the request's head, which pgcld's HTTP library caps at 32 KiB:
# larger id lists go in a JSON body instead.
MAX_ID_HEADER_BYTES = 16 * 1024

RETRY_STATUSES = (429, 503)


def _json_bytes(value):
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")


def _retry_after_seconds(value):
    """Retry-After in seconds (a number of seconds or an HTTP date), or None."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.timezone.utc)
    return max(0.0, (when - datetime.datetime.now(datetime.timezone.utc)).total_seconds())


def _query_value(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(datetime.timezone.utc).replace(tzinfo=None)
        return value.isoformat(timespec="microseconds") + "Z"
    return str(value)


def _error_from(status, headers, body):
    """The PgcldError of an error answer: pgcld's JSON error body, or (another body, e.g. the HTML
    page libmicrohttpd or a proxy sends) code http_<status> with the start of the text."""
    retry_after = _retry_after_seconds(headers.get("Retry-After"))
    try:
        error = json.loads(body.decode("utf-8"))["error"]
        if isinstance(error, dict) and isinstance(error.get("code"), str):
            return PgcldError(status, error["code"], error.get("message", ""), error.get("field"),
                              error.get("item"), retry_after, body)
    except (UnicodeDecodeError, ValueError, KeyError, TypeError):
        pass
    text = body[:200].decode("utf-8", "replace").strip()
    return PgcldError(status, f"http_{status}", text or http.client.responses.get(status, ""), None, None,
                      retry_after, body)


class ScoreResponse:
    """The answer of POST /v1/score. results: one dict per item, in the order of the embeddings
    (``id``, ``decision_id``, ``label``, ``label_index``, ``probabilities``, ``toxicity``,
    ``decision``, ``vector``...); model: the model version that scored them (``name``,
    ``version``, ``task``, ``sha256``); policy: its decision policy; request_id: pgcld's id of the
    request; idempotency_key: the key it was sent with; replayed: True when pgcld answered a
    repeat with its stored answer (an earlier attempt was scored and recorded). Iterating, len()
    and indexing go over results."""

    def __init__(self, answer, idempotency_key, replayed):
        self.request_id = answer.get("request_id")
        self.model = answer.get("model")
        self.policy = answer.get("policy")
        self.results = answer["results"]
        self.idempotency_key = idempotency_key
        self.replayed = replayed
        self.raw = answer

    def __iter__(self):
        return iter(self.results)

    def __len__(self):
        return len(self.results)

    def __getitem__(self, index):
        return self.results[index]

    def __repr__(self):
        model = self.model or {}
        return (f"ScoreResponse(request_id={self.request_id!r}, model={model.get('name')!r} "
                f"v{model.get('version')}, {len(self.results)} results)")


class _Request:
    """One API call: method, path (with its query string), body, headers, and whether repeating
    it after a lost answer is safe (reads, and scoring with an Idempotency-Key)."""

    def __init__(self, method, path, body=None, headers=None, repeatable=True):
        self.method = method
        self.path = path
        self.body = body
        self.headers = headers or {}
        self.repeatable = repeatable


class Client:
    """A client of one pgcld (or a load balancer in front of several).

    url: ``http://host:port`` or ``https://...`` (a path prefix is kept); api_key: the key sent as
    ``Authorization: Bearer`` (None with ``--auth off``); timeout: seconds per attempt (connect and
    each read); retries: how many times a request is repeated after a retryable failure (0: never);
    backoff and max_backoff: the first and the longest wait, in seconds, when the answer gives no
    Retry-After (doubling from one attempt to the next); max_wait: the longest Retry-After honoured
    (a longer one raises the error at once); on_retry: called before each wait as
    ``on_retry(attempt, delay_seconds, error)`` (error: the PgcldError or the network error), for
    logging; ssl_context: for https."""

    def __init__(self, url, api_key=None, timeout=30.0, retries=3, backoff=0.2, max_backoff=10.0,
                 max_wait=60.0, on_retry=None, ssl_context=None):
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"url must be http://host[:port] or https://host[:port], not {url!r}")
        if retries < 0:
            raise ValueError("retries must be >= 0")
        self.url = url
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port or (443 if self._https else 80)
        self._prefix = parts.path.rstrip("/")
        self.api_key = api_key
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.max_wait = max_wait
        self.on_retry = on_retry
        self._ssl_context = ssl_context
        self._local = threading.local()

    # ---- scoring

    def score(self, embeddings, model=None, ids=None, return_vector=None, idempotency_key=None):
        """Scores embeddings (a 2-D numpy array, or a sequence of rows: lists of floats or 1-D
        arrays) with `model` (default: the daemon's default model); returns a ScoreResponse whose
        results are in the order of the embeddings. ids: one string per embedding (default "0",
        "1", ... as pgcld gives them). return_vector: whether each result carries its vector
        (default pgcld's: yes). idempotency_key: the key that makes repeats safe (default: a new
        random one per call; pass your own, e.g. a batch id, to make a repeat after a restart of
        your pipeline safe too). Raises PgcldError for an error answer (after the retries)."""
        if ids is not None:
            ids = [self._item_id(i) for i in ids]
        key = idempotency_key or f"pgcld-py-{uuid.uuid4()}"
        if _np is not None and isinstance(embeddings, _np.ndarray):
            if embeddings.ndim != 2:
                raise ValueError(f"embeddings must be a 2-D array (n, D), not {embeddings.ndim}-D")
            request = self._octet_request(embeddings, model, ids, return_vector)
            if request is None:  # the ids do not fit in a header
                request = self._json_request(list(embeddings), model, ids, return_vector)
        else:
            request = self._json_request(embeddings, model, ids, return_vector)
        request.headers["Idempotency-Key"] = key
        status, headers, body = self._call(request)
        return ScoreResponse(json.loads(body), key, headers.get("Idempotent-Replayed") == "true")

    @staticmethod
    def _item_id(item_id):
        if isinstance(item_id, str):
            return item_id
        if isinstance(item_id, int) and not isinstance(item_id, bool):
            return str(item_id)
        raise TypeError(f"an item id must be a string (or an int), not {type(item_id).__name__}")

    def _octet_request(self, array, model, ids, return_vector):
        """The octet-stream request of a 2-D array, or None when the ids are too many for a header."""
        if ids is not None and len(ids) != array.shape[0]:
            raise ValueError(f"{len(ids)} ids for {array.shape[0]} embeddings")
        headers = {"Content-Type": "application/octet-stream"}
        if ids is not None:
            header = json.dumps(ids, separators=(",", ":"))  # ASCII: \u escapes for the rest
            if len(header) > MAX_ID_HEADER_BYTES:
                return None
            headers["Pgcld-Item-Ids"] = header
        query = {}
        if model is not None:
            query["model"] = model
        if return_vector is not None:
            query["return_vector"] = return_vector
        body = _np.ascontiguousarray(array, dtype="<f4").tobytes()
        return _Request("POST", self._path("/v1/score", query), body, headers)

    def _json_request(self, rows, model, ids, return_vector):
        rows = list(rows)
        if ids is not None and len(ids) != len(rows):
            raise ValueError(f"{len(ids)} ids for {len(rows)} embeddings")
        items = []
        for index, row in enumerate(rows):
            item = {"id": ids[index] if ids is not None else str(index)}
            item.update(self._embedding_member(row))
            items.append(item)
        body = {"items": items}
        if model is not None:
            body["model"] = model
        if return_vector is not None:
            body["return_vector"] = bool(return_vector)
        return _Request("POST", self._path("/v1/score"), _json_bytes(body),
                        {"Content-Type": "application/json"})

    @staticmethod
    def _embedding_member(row):
        """{"embedding_b64": ...} with the row as little-endian float32, or {"embedding": [...]}
        when it cannot be packed (a value float32 cannot hold, or not a number): pgcld then names
        the item and the value in its error."""
        if _np is not None and isinstance(row, _np.ndarray):
            if row.ndim != 1:
                raise ValueError(f"an embedding must be 1-D, not {row.ndim}-D")
            packed = _np.ascontiguousarray(row, dtype="<f4").tobytes()
        else:
            row = list(row)
            try:
                packed = struct.pack(f"<{len(row)}f", *row)
            except (OverflowError, struct.error):
                return {"embedding": row}
        return {"embedding_b64": base64.b64encode(packed).decode("ascii")}

    # ---- decisions, contests, resolutions, proofs

    def decisions(self, page_size=None, **filters):
        """Iterates the decisions that match every filter (GET /v1/decisions: model, version,
        label, decision, item_id, request_id, since, until (str or datetime), contest), newest
        first, following the cursors page after page (page_size: the `limit` of each page)."""
        if page_size is not None:
            filters["limit"] = page_size
        return self._pages("/v1/decisions", "decisions", filters)

    def contests(self, status="open", page_size=None):
        """Iterates the contest queue (GET /v1/contests): status "open" (oldest filing first) or
        "resolved" (most recently resolved first), following the cursors."""
        query = {"status": status}
        if page_size is not None:
            query["limit"] = page_size
        return self._pages("/v1/contests", "contests", query)

    def decision(self, decision_id):
        """One decision in full (GET /v1/decisions/{id}), with its contests and effective outcome."""
        return self._get_json(f"/v1/decisions/{self._segment(decision_id)}")

    def statement(self, decision_id):
        """The decision in force as a DSA statement of reasons (GET /v1/decisions/{id}/statement)."""
        return self._get_json(f"/v1/decisions/{self._segment(decision_id)}/statement")

    def proof(self, decision_id, format=None):  # noqa: A002 (the query parameter's name)
        """The decision's inclusion proof (GET /v1/decisions/{id}/proof), a dict: check it with
        verify_inclusion() (with key= the log's note verifier key, log_key(), for the default
        shape). format: None (the transparency log's shape, or the old chain's for a decision
        written before the log), "tlog" or "chain-v2" (the old chain's)."""
        return self._get_json(f"/v1/decisions/{self._segment(decision_id)}/proof", {"format": format})

    def contest_proof(self, contest_id):
        """A contest's proof in the transparency log's shape (GET /v1/contests/{id}/proof): check
        it with tlog_proof.verify_tlog_proof(proof, key, contest_id)."""
        return self._get_json(f"/v1/contests/{self._segment(contest_id)}/proof")

    def log_key(self, writer_id=None):
        """The note verifier key of a writer's log as GET /log/ lists it (the first log when
        writer_id is None). Trust it as far as you trust this connection: keep your own copy."""
        logs = self._get_json("/log/")["logs"]
        for log in logs:
            if writer_id is None or log["writer_id"] == writer_id:
                return log["key"]
        raise KeyError(f"no log of writer {writer_id!r}")

    def rescore(self, decision_id):
        """The decision's stored input scored by the active version, beside the original answer
        (POST /v1/decisions/{id}/rescore; writes nothing)."""
        request = _Request("POST", self._path(f"/v1/decisions/{self._segment(decision_id)}/rescore"))
        return json.loads(self._call(request)[2])

    def contest(self, decision_id, reason):
        """Files a contest of the decision (POST /v1/decisions/{id}/contests); returns the contest
        (``contest_id``, ``status`` "open", ...). Raises PgcldError 409 ``contest_open`` when one
        is open already, 422 ``contest_window_closed`` past the window."""
        request = _Request("POST", self._path(f"/v1/decisions/{self._segment(decision_id)}/contests"),
                           _json_bytes({"reason": reason}), {"Content-Type": "application/json"},
                           repeatable=False)
        return json.loads(self._call(request)[2])

    def resolve(self, contest_id, outcome, note, corrected_label=None):
        """Resolves a contest (POST /v1/contests/{id}/resolution): outcome "upheld" or
        "overturned" (optionally with the corrected_label); another reviewer than the filer must
        resolve it (403 ``filer_cannot_resolve``). Returns the resolution."""
        body = {"outcome": outcome, "note": note}
        if corrected_label is not None:
            body["corrected_label"] = corrected_label
        request = _Request("POST", self._path(f"/v1/contests/{self._segment(contest_id)}/resolution"),
                           _json_bytes(body), {"Content-Type": "application/json"}, repeatable=False)
        return json.loads(self._call(request)[2])

    def _pages(self, route, member, query):
        cursor = None
        while True:
            page_query = dict(query)
            if cursor is not None:
                page_query["cursor"] = cursor
            page = self._get_json(route, page_query)
            yield from page[member]
            cursor = page.get("next_cursor")
            if cursor is None:
                return

    def _get_json(self, route, query=None):
        return json.loads(self._call(_Request("GET", self._path(route, query)))[2])

    @staticmethod
    def _segment(value):
        return urllib.parse.quote(str(value), safe="")

    def _path(self, route, query=None):
        path = self._prefix + route
        if query:
            path += "?" + urllib.parse.urlencode({k: _query_value(v) for k, v in query.items() if v is not None})
        return path

    # ---- transport and retries

    def _call(self, request):
        """Sends request, retrying as the module's notes say; returns (status, headers, body) of a
        2xx answer, or raises PgcldError / PgcldConnectionError."""
        attempt = 0
        while True:
            try:
                status, headers, body = self._send(request)
            except (OSError, http.client.HTTPException) as e:
                retryable = request.repeatable or isinstance(e, ConnectionRefusedError)
                if not retryable or attempt >= self.retries:
                    raise PgcldConnectionError(f"{request.method} {request.path}: no answer ({e!r})") from e
                delay, error = self._backoff(attempt), e
            else:
                if 200 <= status < 300:
                    return status, headers, body
                error = _error_from(status, headers, body)
                in_flight = status == 409 and error.code == "idempotency_in_flight"
                if not (status in RETRY_STATUSES or in_flight) or attempt >= self.retries:
                    raise error
                delay = error.retry_after if error.retry_after is not None else self._backoff(attempt)
                if delay > self.max_wait:
                    raise error
            attempt += 1
            if self.on_retry is not None:
                self.on_retry(attempt, delay, error)
            time.sleep(delay)

    def _backoff(self, attempt):
        return min(self.max_backoff, self.backoff * (2 ** attempt))

    def _connection(self, fresh):
        """This thread's kept-open connection (a new one when fresh or none is open)."""
        connection = getattr(self._local, "connection", None)
        if connection is not None and fresh:
            connection.close()
            connection = None
        if connection is None:
            if self._https:
                connection = http.client.HTTPSConnection(self._host, self._port, timeout=self.timeout,
                                                         context=self._ssl_context)
            else:
                connection = http.client.HTTPConnection(self._host, self._port, timeout=self.timeout)
            self._local.connection = connection
        return connection

    def _send(self, request):
        """One attempt: (status, headers, body). A request that may not be repeated goes on a new
        connection, so that a kept-open connection the server has closed meanwhile (pgcld closes
        idle ones after --connection-timeout) cannot make it fail after it was sent; a repeatable
        one that finds its kept-open connection closed is sent again at once on a new one,
        without counting as a retry. Any failure closes the connection."""
        headers = {"Accept": "application/json", "User-Agent": f"pgcld-client-python/{__version__}"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        headers.update(request.headers)
        if request.method == "POST" and request.body is None:
            headers["Content-Length"] = "0"
        connection = self._connection(fresh=not request.repeatable)
        reused = connection.sock is not None
        try:
            connection.request(request.method, request.path, body=request.body, headers=headers)
            response = connection.getresponse()
            body = response.read()
        except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
            connection.close()
            self._local.connection = None
            if not reused:
                raise
            return self._send(request)  # a new connection now: reused is False there
        except BaseException:
            connection.close()
            self._local.connection = None
            raise
        if response.getheader("Connection", "").lower() == "close":
            connection.close()
            self._local.connection = None
        return response.status, response.headers, body

    def close(self):
        """Closes this thread's kept-open connection (others close when their threads end)."""
        connection = getattr(self._local, "connection", None)
        if connection is not None:
            connection.close()
            self._local.connection = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
