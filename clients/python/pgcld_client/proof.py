"""Offline verification of pgcld inclusion proofs (GET /v1/decisions/{id}/proof), standard library
only. This module checks the old chain's shape ("format": "chain-v2", asked with ?format=chain-v2,
or answered for a decision written before the transparency log); the log's shape, the default,
is tlog_proof.py's (verify_inclusion hands it over). What a proof holds and why each step holds is in docs/audit.md, "Inclusion proofs" and
"The log tree"; in short, four links, each checked here:

1. the leaf: ``leaf_data`` (the decision's row, as stored when the proof was made, in the chain's
   value encoding) hashes to ``leaf_hash`` = SHA-256(0x00 || leaf_data), and decodes, by its
   layout, to a ``decisions`` row whose decision_id column is the proof's decision;
2. the commit: ``leaf_hash`` at ``leaf_index`` of ``tree_size`` leaves, along ``path``, gives
   ``root`` (RFC 9162 section 2.1.3.2);
3. the chain entry: (``seq``, "commit", ``tree_size``, ``root``, ``prev_hash``) encoded hashes to
   ``chain_entry.hash``;
4. the log: SHA-256(0x00 || entry hash) at ``log.leaf_index`` = seq - 1, along ``log.path``, gives
   ``log.root``, which the checkpoint (``log.checkpoint``, and the one the caller holds) signs as
   (``head_seq``, ``log_root``).

A proof checked without anything the caller holds shows only that it is consistent with itself:
pass the chain entry's hash as published (``entry_hash``) or a signed checkpoint kept away from the
database (``checkpoint``) to anchor it. Python's standard library has no Ed25519, so the
checkpoint's signature is not checked here: check the checkpoint file once with
``pgcld audit verify --checkpoint FILE --public-key HEX``."""

import base64
import binascii
import hashlib
import json
import re
import struct

from .errors import ProofError

# The columns of a decisions row in a leaf, after the TEXT kind (docs/audit.md, "Canonical
# encoding"; encoding version 2 puts the stored input's digest in place of the input).
DECISION_COLUMNS = (
    "seq", "decision_id", "created_at", "request_id", "item_id", "model_name", "model_version",
    "model_sha256", "label", "label_index", "probabilities", "toxicity", "decision", "policy",
    "t_review", "t_block", "vector", "input_sha256", "latency_us", "input_digest", "input_dtype",
)

# The decision leaf's extension (migration 0011; docs/audit.md, "Decision leaf, extended"): after
# DECISION_COLUMNS when any of them is set (the row's trace id, the item's statement facts).
DECISION_EXTENSION = ("trace_id", "content_date", "territorial_scope", "content_language")

# Each column's type in a leaf (the two tuples above, in order): I INTEGER, R REAL, T TEXT, B BLOB;
# lower case: that type or NULL.
_DECISION_TYPES = "ITTTTTTTTITrTTrrBTIbt" "tttt"
_TYPE_OF_LETTER = {"I": int, "R": float, "T": str, "B": bytes}

# Members of a decision record (GET /v1/decisions/{id}) or a score result that the leaf must
# repeat exactly when the caller passes one (texts and integers: no float printing in between).
COMPARED_MEMBERS = ("seq", "decision_id", "created_at", "request_id", "item_id", "model_name",
                    "model_version", "model_sha256", "label", "label_index", "decision",
                    "input_sha256", "latency_us", "trace_id", "content_date", "territorial_scope",
                    "content_language")
MEMBER_ALIASES = {"id": "item_id"}  # a score result's "id" is the row's item_id

_HEX64 = re.compile(r"[0-9a-f]{64}")

_TAG_NULL, _TAG_INTEGER, _TAG_REAL, _TAG_TEXT, _TAG_BLOB = 0, 1, 2, 3, 4


class InclusionResult:
    """A proof that verified. decision: the leaf's row as a dict (DECISION_COLUMNS, and the extension's
    four when the leaf has it; ``extra``: always empty, kept for earlier callers: a leaf with values
    after its layout is refused); entry_hash: the chain entry that commits to it;
    log_size and log_root: the log tree it is in; checkpoint: the checkpoint that signs that tree
    (the caller's, else the proof's, else None); anchored_by: "checkpoint", "entry_hash" or None
    (the proof was only checked against itself)."""

    def __init__(self, decision, entry_hash, log_size, log_root, checkpoint, anchored_by):
        self.decision = decision
        self.entry_hash = entry_hash
        self.log_size = log_size
        self.log_root = log_root
        self.checkpoint = checkpoint
        self.anchored_by = anchored_by

    def __repr__(self):
        return (f"InclusionResult(decision_id={self.decision['decision_id']!r}, "
                f"entry_hash={self.entry_hash!r}, anchored_by={self.anchored_by!r})")


def _sha256(data):
    return hashlib.sha256(data).digest()


def _leaf_hash(data):
    return _sha256(b"\x00" + data)


def _node_hash(left, right):
    return _sha256(b"\x01" + left + right)


def _encode_integer(value):
    return bytes([_TAG_INTEGER]) + struct.pack(">q", value)


def _encode_text(value):
    raw = value.encode("utf-8")
    return bytes([_TAG_TEXT]) + struct.pack(">I", len(raw)) + raw


def _hex_digest(value, what):
    """value as 32 bytes; ProofError unless it is 64 lowercase hex digits."""
    if not isinstance(value, str) or not _HEX64.fullmatch(value):
        raise ProofError(f"{what} is not 64 lowercase hex digits")
    return bytes.fromhex(value)


def _count(value, what, minimum):
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ProofError(f"{what} is not an integer >= {minimum}")
    return value


def decode_values(data):
    """The values of a chain encoding (docs/audit.md, "Canonical encoding"), in order: None, int,
    float, str or bytes. ProofError when the bytes are not a whole sequence of values."""
    values, at = [], 0
    while at < len(data):
        tag, at = data[at], at + 1
        if tag == _TAG_NULL:
            values.append(None)
        elif tag in (_TAG_INTEGER, _TAG_REAL):
            if at + 8 > len(data):
                raise ProofError("leaf_data ends inside a number")
            values.append(struct.unpack_from(">q" if tag == _TAG_INTEGER else ">d", data, at)[0])
            at += 8
        elif tag in (_TAG_TEXT, _TAG_BLOB):
            if at + 4 > len(data):
                raise ProofError("leaf_data ends inside a length")
            (length,), at = struct.unpack_from(">I", data, at), at + 4
            if at + length > len(data):
                raise ProofError("leaf_data ends inside a value")
            raw, at = data[at:at + length], at + length
            try:
                values.append(raw.decode("utf-8") if tag == _TAG_TEXT else raw)
            except UnicodeDecodeError:
                raise ProofError("leaf_data holds a text value that is not UTF-8") from None
        else:
            raise ProofError(f"leaf_data holds an unknown value tag {tag} at byte {at - 1}")
    return values


def decode_decision_leaf(data):
    """The decisions row a leaf holds, read by its layout (docs/audit.md, "Encoding version 2" and
    "Decision leaf, extended"): a dict of DECISION_COLUMNS and DECISION_EXTENSION (None where a
    leaf without the extension has none), and ``extra``, always empty (kept for earlier callers: a
    value past the layout is refused). ProofError unless the leaf is exactly a decisions row: the
    kind "decisions", then 21 values, or 25 with an extension not all NULL, each of its column's
    type. Every claim about the leaf is checked against these fields at their positions, never by
    finding a value somewhere in the bytes: a client's item id or request id can be any text."""
    values = decode_values(data)
    if not values or values[0] != "decisions":
        raise ProofError("leaf_data is not a row of the decisions table")
    row = values[1:]
    plain, extended = len(DECISION_COLUMNS), len(DECISION_COLUMNS) + len(DECISION_EXTENSION)
    if len(row) not in (plain, extended):
        raise ProofError(f"leaf_data holds {len(row)} values, a decisions row has {plain} or, extended, {extended}")
    if len(row) == extended and all(v is None for v in row[plain:]):
        raise ProofError("leaf_data's extension is all NULL, which no decisions row is encoded with")
    for name, letter, value in zip(DECISION_COLUMNS + DECISION_EXTENSION, _DECISION_TYPES, row):
        if not (value is None and letter.islower()) and type(value) is not _TYPE_OF_LETTER[letter.upper()]:
            raise ProofError(f"leaf_data's {name} is a {type(value).__name__}, which a decisions row never holds")
    decision = dict(zip(DECISION_COLUMNS + DECISION_EXTENSION, row + [None] * (extended - len(row))))
    decision["extra"] = []
    return decision


def root_from_inclusion_path(leaf, index, size, path):
    """The root of a Merkle tree of `size` leaves (RFC 9162 section 2.1.3.2) whose leaf `index` has
    hash `leaf` and whose audit path is `path` (32-byte sibling hashes, from the leaf upwards).
    ProofError when the path's length does not fit the tree.

    The walk tracks the leaf's position (`node`) and the last position of its level (`last`): a
    node that is a right child, or the last one of an incomplete level, takes its sibling from the
    left; a last node with no sibling at a level is carried up unchanged until it has one."""
    if not 0 <= index < size:
        raise ProofError("the leaf index is not below the tree size")
    node, last, digest = index, size - 1, leaf
    for sibling in path:
        if last == 0:
            raise ProofError("the path is longer than the tree is high")
        if node % 2 == 1 or node == last:
            digest = _node_hash(sibling, digest)
            while node % 2 == 0 and node != 0:  # carried up: a last node with no right sibling
                node, last = node >> 1, last >> 1
        else:
            digest = _node_hash(digest, sibling)
        node, last = node >> 1, last >> 1
    if last != 0:
        raise ProofError("the path is shorter than the tree is high")
    return digest


def signed_log_head(checkpoint, writer_id=None):
    """(head_seq, log_root) a checkpoint signs: its own head, or in a fleet checkpoint (the
    PostgreSQL store, one log per writer) the head of writer_id."""
    if not isinstance(checkpoint, dict):
        raise ProofError("a checkpoint is not a JSON object")
    if checkpoint.get("format") == "pgcld-fleet-checkpoint":
        heads = [w for w in checkpoint.get("writers") or () if w.get("writer_id") == writer_id]
        if len(heads) != 1:
            raise ProofError(f"the fleet checkpoint signs no single head of writer {writer_id!r}")
        return heads[0].get("head_seq"), heads[0].get("log_root")
    if checkpoint.get("format") != "pgcld-audit-checkpoint":
        raise ProofError(f"unknown checkpoint format {checkpoint.get('format')!r}")
    if writer_id is not None:
        raise ProofError("a proof in one writer's log needs a fleet checkpoint")
    return checkpoint.get("head_seq"), checkpoint.get("log_root")


def _check_against_record(leaf_row, record):
    for member, value in record.items():
        column = MEMBER_ALIASES.get(member, member)
        if column not in COMPARED_MEMBERS:
            continue
        in_leaf = leaf_row.get(column)
        if column == "territorial_scope" and in_leaf is not None:  # the leaf holds the JSON text pgcld wrote
            try:
                in_leaf = json.loads(in_leaf)
            except ValueError:
                raise ProofError("the leaf's territorial_scope is not JSON") from None
        if in_leaf != value:
            raise ProofError(f"the leaf's {column} is {leaf_row.get(column)!r}, the decision given says {value!r}")


def verify_inclusion(proof, entry_hash=None, checkpoint=None, decision=None, key=None):
    """Checks an inclusion proof (a dict, as GET /v1/decisions/{id}/proof answers it) offline;
    returns an InclusionResult, or raises ProofError naming the first link that fails.

    A proof in the transparency log's shape ("format": "tlog", the default answer) is checked by
    tlog_proof.verify_tlog_proof against key, the log's note verifier key (required), and its
    decision's id, read from the record at its position, must be the proof's (and decision's, when
    given); it returns a TlogResult. The rest of this describes the old chain's shape
    ("format": "chain-v2"):

    entry_hash: the hash of the chain entry, as the caller holds it (e.g. ``head_hash`` of
    GET /v1/audit/verify when the entry was the head): the proof must end at that entry.
    checkpoint: a signed checkpoint (the parsed JSON file) the caller holds: it must sign the
    proof's log tree (its signature is not checked here, see the module's notes).
    decision: a decision record (GET /v1/decisions/{id}) or a score result the caller holds: its
    seq, ids, times, model, label, decision, trace id and facts must be the leaf's."""
    if not isinstance(proof, dict):
        raise ProofError("the proof is not a JSON object")
    if proof.get("format") == "tlog":
        from .tlog_proof import verify_tlog_proof  # noqa: PLC0415 (tlog_proof imports this module)
        if proof.get("kind") != "decision":
            raise ProofError(f"a proof of a {proof.get('kind')!r}, not of a decision")
        expected = decision.get("decision_id") if isinstance(decision, dict) else None
        return verify_tlog_proof(proof, key, expected)
    try:
        if proof.get("format", "chain-v2") != "chain-v2":
            raise ProofError(f"format {proof['format']!r}: not a proof this client knows")
        if proof["encoding"] != 2:
            raise ProofError(f"encoding {proof['encoding']!r}: an inclusion proof's leaf is in audit chain encoding 2")
        decision_id = proof["decision_id"]
        try:
            leaf_data = base64.b64decode(proof["leaf_data"], validate=True)
        except (binascii.Error, TypeError, ValueError):
            raise ProofError("leaf_data is not base64") from None
        leaf_row = decode_decision_leaf(leaf_data)
        if leaf_row["decision_id"] != decision_id:
            raise ProofError(f"leaf_data is decision {leaf_row['decision_id']!r}, not {decision_id!r}")
        leaf = _leaf_hash(leaf_data)
        if leaf != _hex_digest(proof["leaf_hash"], "leaf_hash"):
            raise ProofError("leaf_data does not hash to leaf_hash: the row differs from the row chained")

        size = _count(proof["tree_size"], "tree_size", 1)
        path = [_hex_digest(p, "a path hash") for p in proof["path"]]
        commit_root = root_from_inclusion_path(leaf, _count(proof["leaf_index"], "leaf_index", 0), size, path)
        if commit_root != _hex_digest(proof["root"], "root"):
            raise ProofError("the path does not lead from the leaf to the commit's root")

        entry = proof["chain_entry"]
        seq = _count(entry["seq"], "chain_entry.seq", 1)
        _hex_digest(entry["prev_hash"], "chain_entry.prev_hash")
        entry_digest = _sha256(_encode_integer(seq) + _encode_text("commit") + _encode_integer(size) +
                               _encode_text(commit_root.hex()) + _encode_text(entry["prev_hash"]))
        if entry_digest != _hex_digest(entry["hash"], "chain_entry.hash"):
            raise ProofError("the commit's root and prev_hash do not give the chain entry's hash")

        log = proof["log"]
        log_index, log_size = _count(log["leaf_index"], "log.leaf_index", 0), _count(log["tree_size"], "log.tree_size", 1)
        if log_index != seq - 1:
            raise ProofError("the log leaf is not the chain entry's (log.leaf_index != chain_entry.seq - 1)")
        log_path = [_hex_digest(p, "a log path hash") for p in log["path"]]
        log_root = root_from_inclusion_path(_leaf_hash(entry_digest), log_index, log_size, log_path)
        if log_root != _hex_digest(log["root"], "log.root"):
            raise ProofError("the log path does not lead from the chain entry to the log root")

        writer_id = proof.get("writer_id")
        for which, held in (("the proof's checkpoint", log["checkpoint"]), ("the checkpoint given", checkpoint)):
            if held is not None and signed_log_head(held, writer_id) != (log_size, log_root.hex()):
                raise ProofError(f"{which} does not sign this log tree (size {log_size})")
        if entry_hash is not None and entry_digest.hex() != str(entry_hash).lower():
            raise ProofError("the proof ends at another chain entry than the one given")
        if decision is not None:
            _check_against_record(leaf_row, decision)
    except (KeyError, TypeError, AttributeError) as e:
        raise ProofError(f"the proof is malformed ({type(e).__name__}: {e})") from None

    anchored_by = "checkpoint" if checkpoint is not None else "entry_hash" if entry_hash is not None else None
    return InclusionResult(leaf_row, entry_digest.hex(), log_size, log_root.hex(),
                           checkpoint if checkpoint is not None else log["checkpoint"], anchored_by)
