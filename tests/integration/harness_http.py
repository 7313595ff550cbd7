"""HTTP for the integration tests (imported through harness.py, which re-exports it: `H.http_request`).

Requests to a pgcld on 127.0.0.1 over urllib (never through a proxy, never following a redirect) or
over a raw http.client connection (chunked bodies, headers urllib would rewrite); answers as
Response objects, the body decoded as JSON when it is JSON. Standard library only.
"""

import http.client
import json
import urllib.error
import urllib.request

HTTP_TIMEOUT_S = 60.0

# Never go through a proxy, whatever the environment says: loopback only.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):  # pragma: no cover - pgcld never redirects
        return None


_OPENER.add_handler(_NoRedirect())


def error_object(doc):
    """The error of a decoded answer body as {"code", "message"[, "item"][, "field"]}, from either
    shape: {"error": {...}} (/v1) or {"error": "<message>", "code", ["item",] ["field"]} (/v2, the
    Open Inference Protocol's string error). None when doc is not an error body."""
    if not isinstance(doc, dict) or "error" not in doc:
        return None
    if isinstance(doc["error"], dict):
        return doc["error"]
    if isinstance(doc["error"], str) and "code" in doc:
        err = {"code": doc["code"], "message": doc["error"]}
        err.update({k: doc[k] for k in ("item", "field") if k in doc})
        return err
    return None


class Response:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers  # email.message.Message: case-insensitive .get()
        self.body = body
        try:
            self.json = json.loads(body.decode("utf-8")) if body else None
        except (UnicodeDecodeError, ValueError):
            self.json = None

    @property
    def content_type(self):
        return (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()

    def error_code(self):
        return (self.error() or {}).get("code")

    def error(self):
        """The error as {"code", "message"[, "item"][, "field"]}, from either shape pgcld sends:
        /v1's {"error": {...}} or the Open Inference Protocol's {"error": "<message>", "code", ...}
        on /v2 (None when the body is not an error)."""
        return error_object(self.json)

    def __repr__(self):
        text = self.body[:600].decode("utf-8", "replace")
        return f"<Response {self.status} {self.content_type!r} {text!r}>"


def encode_body(body):
    if body is None or isinstance(body, (bytes, bytearray)):
        return body
    if isinstance(body, str):
        return body.encode("utf-8")
    return json.dumps(body, allow_nan=False).encode("utf-8")


def http_request(port, method, path, body=None, headers=None, content_type="application/json",
                 timeout=HTTP_TIMEOUT_S):
    """One HTTP request with urllib. ``body`` may be bytes, str or a JSON-serialisable object.

    ``content_type`` is sent whenever there is a body (None: urllib's default, which is
    application/x-www-form-urlencoded; use raw_request to send none at all).
    Returns a Response for every HTTP status.
    """
    data = encode_body(body)
    hdrs = dict(headers or {})
    if data is not None and content_type is not None:
        hdrs.setdefault("Content-Type", content_type)
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, headers=hdrs,
                                 method=method)
    try:
        with _OPENER.open(req, timeout=timeout) as r:
            return Response(r.status, r.headers, r.read())
    except urllib.error.HTTPError as e:
        try:
            payload = e.read()
        finally:
            e.close()
        return Response(e.code, e.headers, payload)


def raw_request(port, method, path, body=None, headers=None, chunks=None,
                timeout=HTTP_TIMEOUT_S):
    """A request with full control over headers (http.client): no Content-Type unless given,
    or a chunked body when ``chunks`` is a list of bytes.

    Unlike urllib, this reads the server's answer even when the server answered early and
    stopped reading the body (as HTTP/1.1 allows for 413): the send error is ignored and the
    response that is already on the wire is returned.
    """
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.putrequest(method, path)
        for k, v in (headers or {}).items():
            conn.putheader(k, v)
        data = encode_body(body)
        if chunks is not None:
            conn.putheader("Transfer-Encoding", "chunked")
        elif data is not None:
            conn.putheader("Content-Length", str(len(data)))
        conn.endheaders()
        try:
            if chunks is not None:
                for c in chunks:
                    conn.send(b"%x\r\n%s\r\n" % (len(c), c))
                conn.send(b"0\r\n\r\n")
            elif data:
                for i in range(0, len(data), 65536):
                    conn.send(data[i:i + 65536])
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server answered early and stopped reading; read its answer below
        r = conn.getresponse()
        return Response(r.status, r.headers, r.read())
    finally:
        conn.close()
