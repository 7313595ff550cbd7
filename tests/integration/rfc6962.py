"""The naive oracle of the transparency-log tests: RFC 6962 / RFC 9162 section 2.1 Merkle tree
hashing by its recursive definitions, over leaf hashes (never over tiles), so it shares no code
with what it checks. Standard library only."""

import hashlib


def leaf_hash(record):
    """SHA-256(0x00 || record): a leaf's hash."""
    return hashlib.sha256(b"\x00" + record).digest()


def mth(hashes):
    """MTH over already-hashed leaves (RFC 9162 2.1.1); SHA-256 of the empty string for none."""
    n = len(hashes)
    if n == 0:
        return hashlib.sha256(b"").digest()
    if n == 1:
        return hashes[0]
    k = 1
    while k * 2 < n:
        k *= 2
    return hashlib.sha256(b"\x01" + mth(hashes[:k]) + mth(hashes[k:])).digest()


def subproof(m, hashes, complete):
    """SUBPROOF(m, D[n], b) of RFC 9162 2.1.4.1: PROOF(m, D[n]) is subproof(m, hashes, True)."""
    n = len(hashes)
    if m == n:
        return [] if complete else [mth(hashes)]
    k = 1
    while k * 2 < n:
        k *= 2
    if m <= k:
        return subproof(m, hashes[:k], complete) + [mth(hashes[k:])]
    return subproof(m - k, hashes[k:], False) + [mth(hashes[:k])]
