#!/usr/bin/python3
"""A transparency-log witness written from the specifications, for pgcld's tests: c2sp.org/tlog-witness
(the add-checkpoint endpoint), c2sp.org/tlog-cosignature (cosignature/v1 lines), c2sp.org/signed-note
and c2sp.org/tlog-checkpoint (what it checks), RFC 9162 section 2.1.4.2 (consistency proofs). Written
independently of pgcld's C code so that each checks the other. Standard library and Debian's
python3-cryptography (Ed25519) only.

    witness.py --name NAME --seed HEX64 --log VKEY [--log VKEY...] [--seen ORIGIN=SIZE,ROOT_B64]...

The origins it knows are the names of the log verifier keys given (the specification's
recommendation). --seen starts it as if it had already cosigned a checkpoint of that origin (a tree it
may never have been shown by the log: a split view). It listens on 127.0.0.1 on an ephemeral port and
prints one line on stdout, {"port": P, "vkey": "<its cosignature/v1 verifier key>"}, then serves:

    POST /add-checkpoint   as c2sp.org/tlog-witness: 200 and its cosignature line; 400 a malformed
                           request or an old size above the checkpoint's; 403 the checkpoint not signed
                           by the origin's key; 404 an unknown origin; 409 (text/x.tlog.size) the old
                           size is not its latest size, or the same size with another root; 422 a
                           consistency proof that does not verify
    GET /state             one line per origin: "<origin> <size> <root base64>"

Each request is one line on stderr (for the test's log). Exit with SIGTERM."""

import argparse
import base64
import hashlib
import http.server
import json
import struct
import sys
import threading
import time

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

EM_DASH = "\u2014 "
ALG_ED25519 = 0x01
ALG_COSIGNATURE_V1 = 0x04
MAX_PROOF_LINES = 63
EMPTY_ROOT = hashlib.sha256(b"").digest()


def b64decode_strict(text):
    """Canonical standard base64 or None."""
    try:
        raw = base64.b64decode(text, validate=True)
    except (ValueError, TypeError):
        return None
    return raw if base64.b64encode(raw).decode() == text else None


def key_id(name, alg, public_key):
    return hashlib.sha256(name.encode() + b"\n" + bytes([alg]) + public_key).digest()[:4]


def parse_vkey(vkey):
    """(name, key id bytes, alg, public key) of a note verifier key; raises ValueError."""
    parts = vkey.split("+", 2)  # the base64 may hold '+'
    if len(parts) != 3 or not parts[0] or len(parts[1]) != 8:
        raise ValueError("a verifier key is NAME+HEX8+BASE64: %r" % vkey)
    raw = b64decode_strict(parts[2])
    if raw is None or len(raw) != 33:
        raise ValueError("bad key bytes in %r" % vkey)
    kid = bytes.fromhex(parts[1])
    if kid != key_id(parts[0], raw[0], raw[1:]):
        raise ValueError("key id mismatch in %r" % vkey)
    return parts[0], kid, raw[0], raw[1:]


def node_hash(left, right):
    return hashlib.sha256(b"\x01" + left + right).digest()


def verify_consistency(first, second, first_root, second_root, proof):
    """RFC 9162 section 2.1.4.2, step by step."""
    if first == second:
        return not proof and first_root == second_root
    if first == 0 or first > second or not proof:
        return False
    if first & (first - 1) == 0:  # an exact power of two: the first tree is a node of the second
        proof = [first_root] + proof
    fn, sn = first - 1, second - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = proof[0]
    for c in proof[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            if not fn & 1:
                while fn != 0 and not fn & 1:
                    fn >>= 1
                    sn >>= 1
        else:
            sr = node_hash(sr, c)
        fn >>= 1
        sn >>= 1
    return fr == first_root and sr == second_root and sn == 0


def parse_size(text):
    if not text or not text.isdigit() or (len(text) > 1 and text[0] == "0") or len(text) > 19:
        return None
    value = int(text)
    return value if value < 2**63 else None


class Refusal(Exception):
    def __init__(self, status, message, body=None, content_type="text/plain; charset=utf-8"):
        super().__init__(message)
        self.status = status
        self.body = body if body is not None else (message + "\n")
        self.content_type = content_type


class Witness:
    def __init__(self, name, seed, log_vkeys, seen):
        self.name = name
        self.private = Ed25519PrivateKey.from_private_bytes(seed)
        public = self.private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        self.key_id = key_id(name, ALG_COSIGNATURE_V1, public)
        self.vkey = "%s+%s+%s" % (name, self.key_id.hex(),
                                  base64.b64encode(bytes([ALG_COSIGNATURE_V1]) + public).decode())
        self.logs = {}  # origin -> (key name, key id, Ed25519PublicKey)
        for vkey in log_vkeys:
            kname, kid, alg, pub = parse_vkey(vkey)
            if alg != ALG_ED25519:
                raise ValueError("a log key must be of algorithm 0x01: %r" % vkey)
            self.logs[kname] = (kname, kid, Ed25519PublicKey.from_public_bytes(pub))
        self.state = {origin: (0, EMPTY_ROOT) for origin in self.logs}
        for origin, size, root in seen:
            self.state[origin] = (size, root)
        self.lock = threading.Lock()

    def cosign(self, text):
        """A cosignature/v1 line over the checkpoint text, at the current time."""
        timestamp = int(time.time())
        message = b"cosignature/v1\ntime %d\n" % timestamp + text
        signature = self.private.sign(message)
        blob = self.key_id + struct.pack(">Q", timestamp) + signature
        return EM_DASH + self.name + " " + base64.b64encode(blob).decode() + "\n"

    def check_signed_checkpoint(self, note):
        """(origin, size, root, text bytes) of a note the origin's log signed; raises Refusal."""
        split = note.find(b"\n\n")
        if split < 0:
            raise Refusal(400, "the checkpoint is not a signed note")
        text, sigs = note[:split + 1], note[split + 2:]
        try:
            lines = text.decode("utf-8").split("\n")[:-1]
            sig_lines = sigs.decode("utf-8").split("\n")
        except UnicodeDecodeError:
            raise Refusal(400, "the checkpoint is not UTF-8")
        if len(lines) < 3 or any(not line for line in lines) or sig_lines[-1] != "":
            raise Refusal(400, "the checkpoint text is not origin, size, root")
        origin = lines[0]
        size = parse_size(lines[1])
        root = b64decode_strict(lines[2])
        if size is None or root is None or len(root) != 32:
            raise Refusal(400, "the checkpoint's size or root is malformed")
        if origin not in self.logs:
            raise Refusal(404, "unknown origin %r" % origin)
        kname, kid, public = self.logs[origin]
        for line in sig_lines[:-1]:
            if not line.startswith(EM_DASH):
                raise Refusal(400, "a malformed signature line")
            fields = line[len(EM_DASH):].split(" ")
            if len(fields) != 2:
                raise Refusal(400, "a malformed signature line")
            blob = b64decode_strict(fields[1])
            if blob is None or len(blob) < 5:
                raise Refusal(400, "a malformed signature")
            if fields[0] != kname or blob[:4] != kid:
                continue
            try:
                public.verify(blob[4:], text)
            except InvalidSignature:
                raise Refusal(403, "the log's signature does not verify")
            return origin, size, root, text
        raise Refusal(403, "the checkpoint is not signed by the log's key")

    def add_checkpoint(self, body):
        """(status, content type, body) of an add-checkpoint request."""
        end_old = body.find(b"\n")
        if end_old < 0 or not body.startswith(b"old "):
            raise Refusal(400, "the request does not start with an old size")
        old = parse_size(body[4:end_old].decode("ascii", "replace"))
        if old is None:
            raise Refusal(400, "a malformed old size")
        rest = body[end_old + 1:]
        proof = []
        while True:
            end = rest.find(b"\n")
            if end < 0:
                raise Refusal(400, "the request has no blank line before the checkpoint")
            line, rest = rest[:end], rest[end + 1:]
            if not line:
                break
            node = b64decode_strict(line.decode("ascii", "replace"))
            if node is None or len(node) != 32 or len(proof) == MAX_PROOF_LINES:
                raise Refusal(400, "a malformed proof line, or too many")
            proof.append(node)
        origin, size, root, text = self.check_signed_checkpoint(rest)
        if old > size:
            raise Refusal(400, "the old size %d is above the checkpoint's %d" % (old, size))
        with self.lock:
            latest_size, latest_root = self.state[origin]
            conflict = Refusal(409, "conflict", body="%d\n" % latest_size, content_type="text/x.tlog.size")
            if old != latest_size:
                raise conflict
            if old == size:
                if root != latest_root:
                    raise conflict
                if proof:
                    raise Refusal(422, "a proof between equal sizes")
            elif old == 0:
                if proof:
                    raise Refusal(422, "a proof from the empty tree")
            elif not verify_consistency(old, size, latest_root, root, proof):
                raise Refusal(422, "the consistency proof from %d to %d does not verify" % (old, size))
            self.state[origin] = (size, root)
            return 200, "text/plain; charset=utf-8", self.cosign(text)

    def state_text(self):
        with self.lock:
            return "".join("%s %d %s\n" % (origin, size, base64.b64encode(root).decode())
                           for origin, (size, root) in sorted(self.state.items()))


def make_handler(witness):
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def answer(self, status, content_type, body):
            data = body.encode()
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self):
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if 0 <= length <= 1 << 20 else b""
            if self.path != "/add-checkpoint":
                self.answer(404, "text/plain; charset=utf-8", "not found\n")
                return
            try:
                status, content_type, text = witness.add_checkpoint(body)
            except Refusal as refusal:
                status, content_type, text = refusal.status, refusal.content_type, refusal.body
            self.answer(status, content_type, text)

        def do_GET(self):
            if self.path == "/state":
                self.answer(200, "text/plain; charset=utf-8", witness.state_text())
            else:
                self.answer(404, "text/plain; charset=utf-8", "not found\n")

        def log_message(self, fmt, *args):
            sys.stderr.write("witness %s: %s\n" % (witness.name, fmt % args))

    return Handler


def parse_seen(value):
    head, _, root_text = value.rpartition(",")  # a base64 root ends in '='
    origin, _, size_text = head.rpartition("=")
    size, root = parse_size(size_text), b64decode_strict(root_text)
    if not origin or size is None or root is None or len(root) != 32:
        raise argparse.ArgumentTypeError("--seen ORIGIN=SIZE,ROOT_B64: %r" % value)
    return origin, size, root


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--name", required=True)
    parser.add_argument("--seed", required=True, help="64 hex digits: the Ed25519 seed of the witness's key")
    parser.add_argument("--log", action="append", default=[], help="a log's verifier key (algorithm 0x01)")
    parser.add_argument("--seen", action="append", default=[], type=parse_seen)
    args = parser.parse_args()
    witness = Witness(args.name, bytes.fromhex(args.seed), args.log, args.seen)
    class Server(http.server.ThreadingHTTPServer):
        def handle_error(self, request, client_address):
            # a client that gave up (its timeout) before the answer: one line, not a traceback
            sys.stderr.write("witness %s: %s from %s\n" % (witness.name, sys.exc_info()[1], client_address))

    server = Server(("127.0.0.1", 0), make_handler(witness))
    print(json.dumps({"port": server.server_address[1], "vkey": witness.vkey}), flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
