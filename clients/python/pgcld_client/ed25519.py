"""Ed25519 signature verification (RFC 8032 section 5.1.7), standard library only: what the client
needs to check a checkpoint's signed note (C2SP signed-note). Verification only, not constant time
(it handles public data). docs/verify_proof.py carries the same few lines, as a stand-alone script
must; the two are checked against each other and against pgcld's own signatures by the tests."""

import hashlib

_P = 2 ** 255 - 19
_L = 2 ** 252 + 27742317777372353535851937790883648493
_D = -121665 * pow(121666, _P - 2, _P) % _P
_SQRT_M1 = pow(2, (_P - 1) // 4, _P)
_IDENTITY = (0, 1, 1, 0)


def _add(a, b):
    """The sum of two points in extended coordinates (RFC 8032 section 5.1.4)."""
    x1, y1, z1, t1 = a
    x2, y2, z2, t2 = b
    ea, eb = (y1 - x1) * (y2 - x2) % _P, (y1 + x1) * (y2 + x2) % _P
    ec, ed = t1 * 2 * _D * t2 % _P, z1 * 2 * z2 % _P
    e, f, g, h = eb - ea, ed - ec, ed + ec, eb + ea
    return (e * f % _P, g * h % _P, f * g % _P, e * h % _P)


def _multiply(k, point):
    """k times point (double and add)."""
    acc = _IDENTITY
    while k:
        if k & 1:
            acc = _add(acc, point)
        point, k = _add(point, point), k >> 1
    return acc


def _equal(a, b):
    return (a[0] * b[2] - b[0] * a[2]) % _P == 0 and (a[1] * b[2] - b[1] * a[2]) % _P == 0


def _decode_point(data):
    """The point a 32-byte encoding names (RFC 8032 section 5.1.3); ValueError when it names none."""
    if len(data) != 32:
        raise ValueError("an Ed25519 point is 32 bytes")
    y = int.from_bytes(data, "little")
    sign, y = y >> 255, y & ((1 << 255) - 1)
    if y >= _P:
        raise ValueError("not an Ed25519 point")
    x2 = (y * y - 1) * pow(_D * y * y + 1, _P - 2, _P) % _P
    x = pow(x2, (_P + 3) // 8, _P)
    if (x * x - x2) % _P:
        x = x * _SQRT_M1 % _P
    if (x * x - x2) % _P or (x == 0 and sign):
        raise ValueError("not an Ed25519 point")
    if x & 1 != sign:
        x = _P - x
    return (x, y, 1, x * y % _P)


_BASE = _decode_point((4 * pow(5, _P - 2, _P) % _P).to_bytes(32, "little"))


def verify(public_key, message, signature):
    """Whether signature (64 bytes) is public_key's (32 bytes) Ed25519 signature of message (bytes).
    False for any malformed key or signature, never an exception."""
    if len(signature) != 64 or len(public_key) != 32:
        return False
    try:
        a, r = _decode_point(public_key), _decode_point(signature[:32])
    except ValueError:
        return False
    s = int.from_bytes(signature[32:], "little")
    if s >= _L:
        return False
    h = int.from_bytes(hashlib.sha512(signature[:32] + public_key + message).digest(), "little") % _L
    return _equal(_multiply(s, _BASE), _add(r, _multiply(h, a)))
