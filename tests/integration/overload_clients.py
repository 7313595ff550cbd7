"""What the test_overload_* programs share: raw sockets to the daemon (opened from a chosen
local address), a client that trickles its bytes, the wait for a close by the server, raw HTTP
requests and answers read off a socket, scoring bodies and the metric reader.

Imported by tests/integration/test_overload_{connections,capacity,rate_limits}.py (like harness.py).
"""

import http.client
import os
import select
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness as H  # noqa: E402

# Generous: these wait for an answer or a close to come, they do not bound how fast; reached only
# when a test fails (the machine may be shared, and CI runs the sanitizer build on two cores).
ANSWER_TIMEOUT_S = 60.0


def b64_body(n, seed):
    Z = H.random_embeddings(n, 1024, seed)
    return {"items": H.b64_items(Z, prefix=f"s{seed}-")}


def open_socket(port, source="127.0.0.1", timeout=ANSWER_TIMEOUT_S):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout, source_address=(source, 0))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def closed_by_peer(s, wait=0.0):
    """True when the server has closed s (end of stream or reset) within wait seconds."""
    r, _, _ = select.select([s], [], [], wait)
    if not r:
        return False
    try:
        return s.recv(65536) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False


class Trickle:
    """Sends data one byte every interval seconds on s until the server closes s, all data was sent
    or stop() is called (a thread). closed_at: the monotonic time the close was seen (None while
    open); answer: the bytes the server sent before closing (b"": cut without an answer)."""

    def __init__(self, s, data, interval):
        self.s, self.data, self.interval = s, data, interval
        self.closed_at, self.answer = None, b""
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self):
        self.thread.start()
        return self

    def _run(self):
        for i in range(len(self.data)):
            if self._stop.is_set():
                return
            try:
                self.s.send(self.data[i:i + 1])
            except (BrokenPipeError, ConnectionResetError):
                self.closed_at = time.monotonic()
                return
            r, _, _ = select.select([self.s], [], [], self.interval)
            if r:
                try:
                    chunk = self.s.recv(65536)
                except (ConnectionResetError, BrokenPipeError):
                    chunk = b""
                if not chunk:
                    self.closed_at = time.monotonic()
                    return
                self.answer += chunk

    def wait_closed(self, timeout=ANSWER_TIMEOUT_S):
        """True once the server has closed the connection (the thread ended on a close)."""
        self.thread.join(timeout)
        return self.closed_at is not None

    def stop(self):
        self._stop.set()
        self.thread.join(ANSWER_TIMEOUT_S)


def wait_closed(s, timeout=ANSWER_TIMEOUT_S):
    """Reads s until the server closes it; returns (closed, bytes received before the close,
    monotonic time the close was seen or None)."""
    got = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r, _, _ = select.select([s], [], [], max(0.0, deadline - time.monotonic()))
        if not r:
            break
        try:
            chunk = s.recv(65536)
        except (ConnectionResetError, BrokenPipeError):
            chunk = b""
        if not chunk:
            return True, got, time.monotonic()
        got += chunk
    return False, got, None


def source_available(addr):
    try:
        with socket.socket() as s:
            s.bind((addr, 0))
        return True
    except OSError:
        return False


def http_from(port, source, method, path, body=None, headers=None, timeout=ANSWER_TIMEOUT_S):
    """One request from a given local address (127.0.0.2 is another client to the daemon)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout, source_address=(source, 0))
    try:
        data = H.encode_body(body)
        hdrs = dict(headers or {})
        if data is not None:
            hdrs.setdefault("Content-Type", "application/json")
        conn.request(method, path, body=data, headers=hdrs)
        r = conn.getresponse()
        return H.Response(r.status, r.headers, r.read())
    finally:
        conn.close()


metric = H.metric


def raw_score_request(key, body):
    head = (f"POST /v1/score HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Authorization: Bearer {key}\r\nContent-Length: {len(body)}\r\n\r\n").encode()
    return head, body


def read_answer(s, timeout):
    """The next HTTP answer on socket s as an H.Response, or None when none came within timeout."""
    s.settimeout(timeout)
    r = http.client.HTTPResponse(s)
    try:
        r.begin()
        return H.Response(r.status, r.headers, r.read())
    except (socket.timeout, ConnectionResetError, http.client.HTTPException):
        return None


def expect_answer(test, s, status, who):
    """The next answer on socket s, asserted to come within ANSWER_TIMEOUT_S with this status."""
    answer = read_answer(s, ANSWER_TIMEOUT_S)
    test.assertIsNotNone(answer, f"no answer for {who}")
    test.assertEqual(answer.status, status, answer)
    return answer
