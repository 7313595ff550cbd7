#!/usr/bin/env python3
"""Checks a pgcld inclusion proof (GET /v1/decisions/{id}/proof) offline, with the standard library
only (docs/audit.md, "Inclusion proofs"): the leaf, read by its layout, is the decisions row of the
proof's decision_id (field by field, never a search of its bytes), its RFC 9162 path
gives the commit's root, the root gives the chain entry's hash, and the entry's path in the log tree
gives the root a signed checkpoint signs. Also checks a consistency proof (GET /v1/audit/consistency):
that the log tree an older checkpoint signs is a prefix of the one a newer checkpoint signs. On the
PostgreSQL store each writer has its own log: the proof names it (writer_id) and the checkpoint is a
fleet checkpoint, whose head of that writer is the one compared. Usage:
    python3 verify_proof.py [--decision ID] PROOF.json [CHECKPOINT.json | ENTRY_HASH]
    python3 verify_proof.py --consistency CONSISTENCY.json [OLD_CHECKPOINT.json NEW_CHECKPOINT.json]
CHECKPOINT.json: a signed checkpoint you hold (check its signature with `pgcld audit verify
--checkpoint`): it must sign the proof's log tree. ENTRY_HASH: the entry's hash as you hold it.
--decision ID: the decision the proof was handed to you for; without it, read the id it prints.
Exit 0 and "proof OK: decision ID, …" (or "consistency OK"), or 1 and the reason.

A proof in the transparency log's shape ("format": "tlog": GET /v1/decisions/{id}/proof?format=tlog,
GET /v1/contests/{id}/proof, GET /v1/contests/{id}/resolution/proof; docs/audit.md, "Proofs") is
checked against the log's note verifier key (GET /log/ lists it):
    python3 verify_proof.py --key VKEY [--decision ID] PROOF.json
leaf_data hashes to the leaf, the inclusion hashes lead from it at leaf_index to root in a tree of
tree_size, the checkpoint is a signed note of that key (Ed25519, C2SP signed-note) whose text signs
tree_size and root and names the proof's writer, and the record (docs/log-record.md) is read by
position: its kind is the proof's and its id field (a decision's decision_id, a contest's or
resolution's contest_id, bytes 2..17) is the one printed and compared with --decision."""
import base64, hashlib, json, os, sys, uuid

def sha(b): return hashlib.sha256(b).digest()
def text(s): b = s.encode(); return b"\x03" + len(b).to_bytes(4, "big") + b
def integer(v): return b"\x01" + v.to_bytes(8, "big", signed=True)

# A decision's leaf, by its layout (docs/audit.md, "Encoding version 2", "Decision leaf, extended"):
# TEXT "decisions", then the row's 21 columns, then the extension's 4 when any of them is set. A
# type per column: I INTEGER, R REAL, T TEXT, B BLOB, lower case: or NULL. A claim is checked
# against the field at its position: a client's item id or request id can be another decision's id.
COLUMNS = ("seq decision_id created_at request_id item_id model_name model_version model_sha256 label label_index"
           " probabilities toxicity decision policy t_review t_block vector input_sha256 latency_us input_digest"
           " input_dtype trace_id content_date territorial_scope content_language").split()
TYPES = "ITTTTTTTTITrTTrrBTIbt" "tttt"

def values(data):
    """The encoded values of data, [(type letter, value)]: n NULL, I INTEGER, R REAL, T TEXT, B BLOB."""
    out, at = [], 0
    while at < len(data):
        tag, at = data[at], at + 1
        if tag in (3, 4): size, at = int.from_bytes(data[at:at + 4], "big"), at + 4
        else: size = {0: 0, 1: 8, 2: 8}.get(tag, -1)
        if size < 0 or at + size > len(data): raise ValueError("leaf_data is not a sequence of encoded values")
        raw, at = data[at:at + size], at + size
        out.append(("nIRTB"[tag], None if tag == 0 else int.from_bytes(raw, "big", signed=True) if tag == 1 else raw))
    return out

def decision_leaf(data):
    """The decisions row a leaf holds, {column: (type letter, value)}; ValueError when it is not one."""
    v = values(data)
    if v[:1] != [("T", b"decisions")]: raise ValueError("leaf_data is not a decisions row")
    row = v[1:]
    if len(row) not in (21, 25): raise ValueError(f"leaf_data holds {len(row)} columns, a decisions row 21 or 25")
    if len(row) == 25 and all(t == "n" for t, _ in row[21:]): raise ValueError("leaf_data's extension is all NULL")
    for name, want, (t, _) in zip(COLUMNS, TYPES, row):
        if t != want.upper() and not (t == "n" and want.islower()): raise ValueError(f"leaf_data's {name} has the wrong type")
    return dict(zip(COLUMNS, row + [("n", None)] * (25 - len(row))))

def root_from_path(leaf, index, size, path):  # RFC 9162 s2.1.3.2
    if not 0 <= index < size: raise ValueError("leaf_index is not below tree_size")
    fn, sn, r = index, size - 1, leaf
    for p in map(bytes.fromhex, path):
        if sn == 0: raise ValueError("a path is too long")
        if fn & 1 or fn == sn:
            r = sha(b"\x01" + p + r)
            while not fn & 1 and fn: fn, sn = fn >> 1, sn >> 1
        else:
            r = sha(b"\x01" + r + p)
        fn, sn = fn >> 1, sn >> 1
    if sn: raise ValueError("a path is too short")
    return r

def signed_head(cp, writer=None):
    """(size, log root) a checkpoint signs: its head's, or, in a fleet checkpoint (PostgreSQL, one log
    per writer), the head of the proof's writer."""
    if cp.get("format") == "pgcld-fleet-checkpoint":
        heads = [w for w in cp["writers"] if w["writer_id"] == writer]
        if not heads: raise ValueError(f"the fleet checkpoint signs no head of writer {writer!r}")
        return heads[0]["head_seq"], heads[0]["log_root"]
    if writer is not None: raise ValueError("a proof of one writer's log needs a fleet checkpoint")
    return cp["head_seq"], cp["log_root"]

def verify_consistency(c, old=None, new=None):  # RFC 9162 s2.1.4.2
    first, second, path = c["first"], c["second"], [bytes.fromhex(p) for p in c["path"]]
    r1, r2 = bytes.fromhex(c["first_root"]), bytes.fromhex(c["second_root"])
    for cp, size, root in ((old, first, r1), (new, second, r2)):
        if cp and signed_head(cp, c.get("writer_id")) != (size, root.hex()):
            raise ValueError(f"the checkpoint does not sign the log tree of size {size}")
    if not 0 < first <= second: raise ValueError("the sizes are not 0 < first <= second")
    if first == second:
        if path or r1 != r2: raise ValueError("equal sizes need equal roots and an empty path")
        return
    if first & (first - 1) == 0: path = [r1] + path
    if not path: raise ValueError("an empty path")
    fn, sn = first - 1, second - 1
    while fn & 1: fn, sn = fn >> 1, sn >> 1
    fr = sr = path[0]
    for p in path[1:]:
        if sn == 0: raise ValueError("the path is too long")
        if fn & 1 or fn == sn:
            fr, sr = sha(b"\x01" + p + fr), sha(b"\x01" + p + sr)
            while not fn & 1 and fn: fn, sn = fn >> 1, sn >> 1
        else:
            sr = sha(b"\x01" + sr + p)
        fn, sn = fn >> 1, sn >> 1
    if sn or fr != r1 or sr != r2: raise ValueError("the path does not lead to both roots: not consistent")

def verify(proof, held=None):
    if proof["encoding"] != 2: raise ValueError("not an encoding-2 proof")
    data = base64.b64decode(proof["leaf_data"], validate=True)
    claimed = proof["decision_id"]
    if not isinstance(claimed, str) or decision_leaf(data)["decision_id"] != ("T", claimed.encode()):
        raise ValueError("leaf_data is another decision's: its decision_id is not the proof's")
    if sha(b"\x00" + data).hex() != proof["leaf_hash"]: raise ValueError("leaf_data does not hash to the chained leaf_hash")
    root = root_from_path(sha(b"\x00" + data), proof["leaf_index"], proof["tree_size"], proof["path"])
    if root.hex() != proof["root"]: raise ValueError("the path does not lead to root")
    e, log = proof["chain_entry"], proof["log"]
    h = sha(integer(e["seq"]) + text("commit") + integer(proof["tree_size"]) + text(root.hex()) + text(e["prev_hash"]))
    if h.hex() != e["hash"]: raise ValueError("root and prev_hash do not give the chain entry's hash")
    if log["leaf_index"] != e["seq"] - 1: raise ValueError("the log leaf is not the chain entry's")
    if root_from_path(sha(b"\x00" + h), log["leaf_index"], log["tree_size"], log["path"]).hex() != log["root"]:
        raise ValueError("the log path does not lead to the log root")
    for cp in filter(None, [log["checkpoint"], held if isinstance(held, dict) else None]):
        if (signed_head(cp, proof.get("writer_id"))) != (log["tree_size"], log["root"]):
            raise ValueError("a checkpoint does not sign this log tree")
    if isinstance(held, str) and h.hex() != held.lower(): raise ValueError("the chain entry is not the one you hold")

# ---- Ed25519 (RFC 8032 s5.1.7), verification only: points in extended coordinates ----
P = 2 ** 255 - 19
L = 2 ** 252 + 27742317777372353535851937790883648493
D_ = -121665 * pow(121666, P - 2, P) % P
SQRT_M1 = pow(2, (P - 1) // 4, P)

def point_add(a, b):
    x1, y1, z1, t1 = a
    x2, y2, z2, t2 = b
    A, B = (y1 - x1) * (y2 - x2) % P, (y1 + x1) * (y2 + x2) % P
    C, Dd = t1 * 2 * D_ * t2 % P, z1 * 2 * z2 % P
    E, F, G, H = B - A, Dd - C, Dd + C, B + A
    return (E * F % P, G * H % P, F * G % P, E * H % P)

def point_mul(k, pt):
    acc = (0, 1, 1, 0)
    while k:
        if k & 1: acc = point_add(acc, pt)
        pt, k = point_add(pt, pt), k >> 1
    return acc

def point_equal(a, b):
    return (a[0] * b[2] - b[0] * a[2]) % P == 0 and (a[1] * b[2] - b[1] * a[2]) % P == 0

def point_decode(b):
    if len(b) != 32: raise ValueError("an Ed25519 point is 32 bytes")
    y = int.from_bytes(b, "little")
    sign, y = y >> 255, y & ((1 << 255) - 1)
    if y >= P: raise ValueError("not an Ed25519 point")
    x2 = (y * y - 1) * pow(D_ * y * y + 1, P - 2, P) % P
    x = pow(x2, (P + 3) // 8, P)
    if (x * x - x2) % P: x = x * SQRT_M1 % P
    if (x * x - x2) % P or (x == 0 and sign): raise ValueError("not an Ed25519 point")
    if x & 1 != sign: x = P - x
    return (x, y, 1, x * y % P)

BASE = point_decode((4 * pow(5, P - 2, P) % P).to_bytes(32, "little"))

def ed25519_verify(public, message, sig):
    if len(sig) != 64: return False
    try: A, R = point_decode(public), point_decode(sig[:32])
    except ValueError: return False
    s = int.from_bytes(sig[32:], "little")
    if s >= L: return False
    h = int.from_bytes(hashlib.sha512(sig[:32] + public + message).digest(), "little") % L
    return point_equal(point_mul(s, BASE), point_add(R, point_mul(h, A)))

# ---- C2SP signed notes and checkpoints ----
def b64(text, n=None):
    raw = base64.b64decode(text, validate=True)
    if base64.b64encode(raw).decode() != text or (n is not None and len(raw) != n): raise ValueError(f"bad base64 {text!r}")
    return raw

def parse_vkey(vkey):
    name, key_id, key = vkey.split("+", 2)
    raw = b64(key, 33)
    if raw[0] != 1: raise ValueError("--key is not an Ed25519 note verifier key")
    if sha(name.encode() + b"\n" + raw)[:4] != bytes.fromhex(key_id): raise ValueError("--key's key hash is wrong")
    return name, bytes.fromhex(key_id), raw[1:]

def open_checkpoint(note, vkey):
    """(origin, size, root) of a checkpoint note signed by vkey; ValueError otherwise."""
    name, key_id, public = parse_vkey(vkey)
    text, sep, sigs = note.partition("\n\n")
    if not sep: raise ValueError("the checkpoint is not a signed note")
    text += "\n"
    for line in sigs.splitlines():
        if not line.startswith("\u2014 "): raise ValueError("a malformed signature line")
        who, sig = line[2:].split(" ", 1)
        raw = b64(sig)
        if who == name and raw[:4] == key_id:
            if not ed25519_verify(public, text.encode(), raw[4:]): raise ValueError("the checkpoint's signature is wrong")
            break
    else:
        raise ValueError(f"the checkpoint is not signed by {name}")
    lines = text.split("\n")
    if lines[0] != name: raise ValueError(f"the checkpoint is of log {lines[0]!r}, not of the key's {name!r}")
    if not lines[1].isdigit() or str(int(lines[1])) != lines[1]: raise ValueError("the checkpoint's size is malformed")
    return lines[0], int(lines[1]), b64(lines[2], 32)

RECORD_KINDS = {"decision": 1, "contest": 4, "resolution": 5}

def verify_tlog(proof, vkey, expected=None):
    """The proved event's id: the record's id field read at its position; ValueError when anything fails."""
    if not vkey: raise ValueError("a tlog proof needs --key: the log's note verifier key (GET /log/ lists it)")
    data, root = b64(proof["leaf_data"]), b64(proof["root"], 32)
    index, size, path = proof["leaf_index"], proof["tree_size"], [b64(h, 32).hex() for h in proof["inclusion"]]
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (index, size)): raise ValueError("bad sizes")
    if root_from_path(sha(b"\x00" + data), index, size, path) != root:
        raise ValueError("leaf_data at leaf_index does not prove to root")
    if not proof["checkpoint"]: raise ValueError("no checkpoint: nothing signs the root (ask again after the next one)")
    origin, cp_size, cp_root = open_checkpoint(proof["checkpoint"], vkey)
    if not origin.endswith("/" + proof["writer_id"]): raise ValueError("the checkpoint is another writer's log")
    if (cp_size, cp_root) != (size, root): raise ValueError("the checkpoint does not sign the proof's tree")
    kind = proof["kind"]
    if kind not in RECORD_KINDS or len(data) < 18 or data[0] != 1 or data[1] != RECORD_KINDS[kind]:
        raise ValueError(f"leaf_data is not a {kind} record (version 1)")
    proved = str(uuid.UUID(bytes=data[2:18]))  # the record's id field, at its position
    if expected is not None and proved != expected: raise ValueError(f"this is a proof of {kind} {proved}, not of {expected}")
    return kind, proved

if __name__ == "__main__":
    args, expected, vkey = sys.argv[1:], None, None
    while len(args) >= 2 and args[0] in ("--decision", "--key"):  # the event you were told this proves; the log's key
        if args[0] == "--decision": expected = args[1]
        else: vkey = args[1]
        args = args[2:]
    try:
        if args[0] != "--consistency" and json.load(open(args[0])).get("format") == "tlog":
            kind, proved = verify_tlog(json.load(open(args[0])), vkey, expected)
            p = json.load(open(args[0]))
            print(f"proof OK: {kind} {proved}, leaf {p['leaf_index']} of {p['writer_id']}'s log of {p['tree_size']}")
            sys.exit(0)
        if args[0] == "--consistency":
            verify_consistency(*[json.load(open(f)) for f in args[1:4]])
        else:
            proof, held = json.load(open(args[0])), args[1] if len(args) > 1 else None
            verify(proof, json.load(open(held)) if held and os.path.exists(held) else held)
            if expected is not None and proof["decision_id"] != expected:
                raise ValueError(f"this is a proof of decision {proof['decision_id']}, not of {expected}")
    except (ValueError, KeyError, TypeError) as e:
        sys.exit(f"proof FAILED: {e}")
    print("consistency OK" if args[0] == "--consistency" else
          f"proof OK: decision {proof['decision_id']}, leaf {proof['leaf_index']} of a tree of {proof['tree_size']}")
