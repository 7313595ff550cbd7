"""Offline verification of proofs in the transparency log's shape ("format": "tlog", the default of
GET /v1/decisions/{id}/proof for every event that is a leaf, and of the contest and resolution
proofs; docs/audit.md, "Proofs"), standard library only. Three links, each checked here:

1. the leaf: SHA-256(0x00 || leaf_data) is leaf ``leaf_index`` of the writer's log, and
   ``inclusion`` (RFC 9162 section 2.1.3.2) leads from it to ``root`` of ``tree_size`` leaves;
2. the checkpoint: ``checkpoint`` is a C2SP signed note whose Ed25519 signature by the caller's
   note verifier key (``GET /log/`` lists it; keep your own copy) is valid, whose origin is that
   key's name and ends in ``/<writer_id>``, and whose size and root are ``tree_size`` and ``root``;
3. the record: ``leaf_data`` is a version-1 record (docs/log-record.md) of the proof's ``kind``,
   and its id, read at its position (bytes 2..17, a UUID: decision_id of a decision, contest_id
   of a contest or its resolution), is the event the caller asked about: a proof relabelled from
   another event is refused, whatever texts the record holds elsewhere."""

import base64
import binascii
import hashlib
import uuid

from . import ed25519
from .errors import ProofError
from .proof import root_from_inclusion_path

# docs/log-record.md: byte 0 the record's version, byte 1 its kind, bytes 2..17 the event's id
RECORD_VERSION = 1
RECORD_KINDS = {"decision": 1, "contest": 4, "resolution": 5}
_ID_AT = slice(2, 18)


class TlogResult:
    """A tlog proof that verified: kind and id (read from the record at their positions),
    writer_id, leaf_index, tree_size, root (hex), the checkpoint note, and record (the daemon's
    decoding, as answered: informational, only kind and id are checked)."""

    def __init__(self, kind, event_id, proof):
        self.kind = kind
        self.id = event_id
        self.writer_id = proof["writer_id"]
        self.leaf_index = proof["leaf_index"]
        self.tree_size = proof["tree_size"]
        self.root = base64.b64decode(proof["root"]).hex()
        self.checkpoint = proof["checkpoint"]
        self.record = proof.get("record")
        self.anchored_by = "checkpoint"

    def __repr__(self):
        return f"TlogResult(kind={self.kind!r}, id={self.id!r}, writer_id={self.writer_id!r})"


def _b64(text, what, size=None):
    """Standard base64 text as bytes (canonical padding; size bytes when given); ProofError otherwise."""
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, TypeError, ValueError):
        raise ProofError(f"{what} is not base64") from None
    if base64.b64encode(raw).decode() != text or (size is not None and len(raw) != size):
        raise ProofError(f"{what} is not {size or 'canonical'}-byte base64")
    return raw


def parse_verifier_key(vkey):
    """(name, key id (4 bytes), Ed25519 public key (32 bytes)) of a note verifier key
    "name+hex8+base64(0x01 || key)" (C2SP signed-note); ProofError when malformed or its id is wrong."""
    try:
        name, key_id, key = str(vkey).split("+", 2)
        key_id = bytes.fromhex(key_id)
    except ValueError:
        raise ProofError("the verifier key is not name+keyid+key") from None
    raw = _b64(key, "the verifier key", 33)
    if raw[0] != 1 or len(key_id) != 4:
        raise ProofError("the verifier key is not an Ed25519 note verifier key")
    if hashlib.sha256(name.encode() + b"\n" + raw).digest()[:4] != key_id:
        raise ProofError("the verifier key's id does not match its name and key")
    return name, key_id, raw[1:]


def open_checkpoint(note, vkey):
    """(origin, size, root bytes) of a checkpoint note signed by vkey; ProofError otherwise."""
    name, key_id, public = parse_verifier_key(vkey)
    if not isinstance(note, str) or not note:
        raise ProofError("no checkpoint: nothing signs the root (ask again after the next checkpoint)")
    text, sep, signatures = note.partition("\n\n")
    if not sep:
        raise ProofError("the checkpoint is not a signed note")
    text += "\n"
    signed = False
    for line in signatures.splitlines():
        if not line.startswith("\u2014 ") or " " not in line[2:]:
            raise ProofError("a malformed signature line in the checkpoint")
        who, sig = line[2:].split(" ", 1)
        raw = _b64(sig, "a checkpoint signature")
        if who == name and raw[:4] == key_id:
            if not ed25519.verify(public, text.encode(), raw[4:]):
                raise ProofError("the checkpoint's signature is wrong")
            signed = True
            break
    if not signed:
        raise ProofError(f"the checkpoint is not signed by {name}")
    lines = text.split("\n")
    if len(lines) < 4 or lines[0] != name:
        raise ProofError(f"the checkpoint is of log {lines[0]!r}, not of the key's {name!r}")
    if not lines[1].isdigit() or str(int(lines[1])) != lines[1]:
        raise ProofError("the checkpoint's size is malformed")
    return lines[0], int(lines[1]), _b64(lines[2], "the checkpoint's root", 32)


def verify_tlog_proof(proof, key, expected_id=None):
    """Checks a tlog proof (a dict, as answered) against the log's note verifier key; returns a
    TlogResult, or raises ProofError naming the first link that fails. expected_id: the event the
    caller asked about (a decision's or contest's id): the record's id must be it."""
    if not isinstance(proof, dict) or proof.get("format") != "tlog":
        raise ProofError("not a proof in the transparency log's shape (format tlog)")
    if not key:
        raise ProofError("a tlog proof needs the log's note verifier key (GET /log/ lists it)")
    try:
        data, root = _b64(proof["leaf_data"], "leaf_data"), _b64(proof["root"], "root", 32)
        index, size = proof["leaf_index"], proof["tree_size"]
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (index, size)) or not 0 <= index < size:
            raise ProofError("leaf_index and tree_size are not a leaf of a tree")
        path = [_b64(h, "an inclusion hash", 32) for h in proof["inclusion"]]
        leaf = hashlib.sha256(b"\x00" + data).digest()
        if root_from_inclusion_path(leaf, index, size, path) != root:
            raise ProofError("leaf_data at leaf_index does not prove to root")
        origin, cp_size, cp_root = open_checkpoint(proof["checkpoint"], key)
        if not isinstance(proof["writer_id"], str) or not origin.endswith("/" + proof["writer_id"]):
            raise ProofError("the checkpoint is another writer's log")
        if (cp_size, cp_root) != (size, root):
            raise ProofError("the checkpoint does not sign the proof's tree")
        kind = proof["kind"]
        if kind not in RECORD_KINDS or len(data) < _ID_AT.stop or data[0] != RECORD_VERSION \
                or data[1] != RECORD_KINDS[kind]:
            raise ProofError(f"leaf_data is not a {kind} record (version {RECORD_VERSION})")
        proved = str(uuid.UUID(bytes=data[_ID_AT]))
        if proof.get("id") is not None and proof["id"] != proved:
            raise ProofError(f"leaf_data is {kind} {proved}, not the proof's {proof['id']!r}")
        if expected_id is not None and proved != str(expected_id).lower():
            raise ProofError(f"this is a proof of {kind} {proved}, not of {expected_id}")
    except (KeyError, TypeError, AttributeError) as e:
        raise ProofError(f"the proof is malformed ({type(e).__name__}: {e})") from None
    return TlogResult(kind, proved, proof)
