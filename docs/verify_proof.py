#!/usr/bin/env python3
"""Checks a pgcld inclusion proof (GET /v1/decisions/{id}/proof) offline, with the standard library
only: the leaf is the decision as recorded, its Merkle path (RFC 9162 s2.1.3.2) gives the commit's
root, and the root gives the chain entry's hash (docs/audit.md). Usage:
    python3 verify_proof.py PROOF.json [ENTRY_HASH]
ENTRY_HASH: the hash of chain entry chain_entry.seq as you hold it (a signed checkpoint at that
entry, or GET /v1/audit/verify's head_hash). Exit 0 and "proof OK", or 1 and the reason."""
import base64, hashlib, json, sys

def sha(b): return hashlib.sha256(b).digest()
def text(s): b = s.encode(); return b"\x03" + len(b).to_bytes(4, "big") + b
def integer(v): return b"\x01" + v.to_bytes(8, "big", signed=True)

def root_from_path(leaf, index, size, path):
    if not 0 <= index < size: raise ValueError("leaf_index is not below tree_size")
    fn, sn, r = index, size - 1, leaf
    for p in path:
        if sn == 0: raise ValueError("the path is too long")
        if fn & 1 or fn == sn:
            r = sha(b"\x01" + p + r)
            while not fn & 1 and fn: fn, sn = fn >> 1, sn >> 1
        else:
            r = sha(b"\x01" + r + p)
        fn, sn = fn >> 1, sn >> 1
    if sn: raise ValueError("the path is too short")
    return r

def verify(proof, entry_hash=None):
    data = base64.b64decode(proof["leaf_data"], validate=True)
    if text(proof["decision_id"]) not in data: raise ValueError("leaf_data is not this decision's")
    leaf = sha(b"\x00" + data)
    if leaf.hex() != proof["leaf_hash"]: raise ValueError("leaf_data does not hash to the chained leaf_hash")
    path = [bytes.fromhex(h) for h in proof["path"]]
    root = root_from_path(leaf, proof["leaf_index"], proof["tree_size"], path)
    if root.hex() != proof["root"]: raise ValueError("the path does not lead to root")
    e = proof["chain_entry"]
    h = sha(integer(e["seq"]) + text("commit") + integer(proof["tree_size"]) + text(root.hex()) + text(e["prev_hash"]))
    if h.hex() != e["hash"]: raise ValueError("root and prev_hash do not give the chain entry's hash")
    if entry_hash and h.hex() != entry_hash.lower(): raise ValueError("the chain entry is not the one you hold")

if __name__ == "__main__":
    try:
        verify(json.load(open(sys.argv[1])), sys.argv[2] if len(sys.argv) > 2 else None)
    except (ValueError, KeyError, TypeError) as e:
        sys.exit(f"proof FAILED: {e}")
    print("proof OK")
